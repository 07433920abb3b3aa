/* libmimprof-sys carries the package's identity. The providers themselves
 * are static inline functions in the public headers, so that wrappers
 * instantiated over them call the allocator directly. */
#include <mimprof/sys.h>

const char *mp_sys_version(void) { return MP_SYS_PACKAGE_VERSION; }
