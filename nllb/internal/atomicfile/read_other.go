//go:build !unix

package atomicfile

// safeOpenFlags: no O_NOFOLLOW or O_NONBLOCK here; ReadRegular's fstat
// check and size limit still apply.
const safeOpenFlags = 0
