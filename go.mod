module herald

go 1.26
