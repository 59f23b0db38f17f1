#ifndef FP_GD_H
#define FP_GD_H
#include <gd.h>

// libgd, loaded with dlopen on first use instead of linked: it pulls in some fifty codec and
// font libraries (HEIF, AVIF, x265, AV1, TIFF, X11, ...) whose loading cost every run of
// fileproviderctl about 6 ms, thumbnails or not.

/// Loads libgd once (any thread); NULL when it is usable, else why not. Call it before any
/// other function here.
const char *fp_gd_load_error(void);

gdImagePtr fp_gd_create_truecolor(int width, int height);
void fp_gd_destroy(gdImagePtr image);
int fp_gd_width(gdImagePtr image);
int fp_gd_height(gdImagePtr image);
int fp_gd_truecolor(int red, int green, int blue);
void fp_gd_filled_rectangle(gdImagePtr image, int x1, int y1, int x2, int y2, int color);
void fp_gd_alpha_blending(gdImagePtr image, int blending);
void fp_gd_copy_resampled(
    gdImagePtr target, gdImagePtr source, int targetX, int targetY, int sourceX, int sourceY, int targetWidth,
    int targetHeight, int sourceWidth, int sourceHeight);
void fp_gd_set_pixel(gdImagePtr image, int x, int y, int color);
void *fp_gd_png(gdImagePtr image, int *size);
void *fp_gd_jpeg(gdImagePtr image, int *size, int quality);
void fp_gd_free(void *bytes);
gdImagePtr fp_gd_from_jpeg(int size, void *bytes);
gdImagePtr fp_gd_from_png(int size, void *bytes);
gdImagePtr fp_gd_from_gif(int size, void *bytes);
gdImagePtr fp_gd_from_webp(int size, void *bytes);

#endif
