// deflateInit2/inflateInit2 are macros (they pass ZLIB_VERSION and sizeof(z_stream)).
#include <zlib.h>
static inline int czlib_deflate_init2(z_streamp s, int level, int windowBits, int memLevel, int strategy) {
    return deflateInit2(s, level, Z_DEFLATED, windowBits, memLevel, strategy);
}
static inline int czlib_inflate_init2(z_streamp s, int windowBits) { return inflateInit2(s, windowBits); }
