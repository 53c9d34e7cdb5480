// glibc's allocator tuning (mallopt), which Swift's Glibc module does not import.
#if defined(__linux__)
#include <features.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#endif
