package main

import "errors"

func runBench(args []string) error {
	return errors.New("not built yet")
}
