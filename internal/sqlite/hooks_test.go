package sqlite

// RemainingWithin is Remaining with the exact count's limit given, for tests of the bound past
// it without an audience of remainingExactUpTo members.
var RemainingWithin = (*Store).remaining
