package pipeline

import "testing"

func TestItemsByIDFindsInAnyOrder(t *testing.T) {
	items := []sendItem{{DeliveryID: "a", Address: "1"}, {DeliveryID: "b", Address: "2"}, {DeliveryID: "c", Address: "3"}}
	x := itemsByID{items: items}
	// In the order sent: no map is built.
	for i, it := range items {
		if got := x.find(i, it.DeliveryID); got.Address != it.Address {
			t.Fatalf("find(%d, %s) = %+v", i, it.DeliveryID, got)
		}
	}
	if x.at != nil {
		t.Fatalf("a map was built for results in order")
	}
	// Out of order (a sender that answers in another order), and an id the batch does not have.
	for i, id := range []string{"c", "a", "b"} {
		if got := x.find(i, id); got.DeliveryID != id {
			t.Fatalf("find(%d, %s) = %+v", i, id, got)
		}
	}
	if got := x.find(0, "zz"); got.DeliveryID != "" {
		t.Fatalf("find of an unknown id = %+v, want the zero item", got)
	}
	if got := x.find(7, "b"); got.Address != "2" {
		t.Fatalf("find past the end = %+v", got)
	}
}
