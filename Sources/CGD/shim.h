#ifndef CGD_SHIM_H
#define CGD_SHIM_H
#include <gd.h>

// Accessors for libgd's image fields, which are macros in gd.h.
static inline int fp_gd_width(gdImagePtr image) { return gdImageSX(image); }
static inline int fp_gd_height(gdImagePtr image) { return gdImageSY(image); }
static inline int fp_gd_truecolor(int r, int g, int b) { return gdTrueColor(r, g, b); }
#endif
