package gittree

// For the external tests: the state file's reader and writer.
var (
	ReadState  = readState
	WriteState = writeState
)

type CheckoutState = checkoutState
