// Command api is the HTTP API behind API Gateway (HTTP API, payload 2.0).
package main

import "herald/internal/awsenv"

func main() { awsenv.StartAPI() }
