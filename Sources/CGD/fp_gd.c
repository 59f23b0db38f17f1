#include "fp_gd.h"

#include "fp_library.h"

#include <pthread.h>

static struct {
    gdImagePtr (*createTrueColor)(int, int);
    void (*destroy)(gdImagePtr);
    void (*filledRectangle)(gdImagePtr, int, int, int, int, int);
    void (*alphaBlending)(gdImagePtr, int);
    void (*copyResampled)(gdImagePtr, gdImagePtr, int, int, int, int, int, int, int, int);
    void (*setPixel)(gdImagePtr, int, int, int);
    void *(*pngPtr)(gdImagePtr, int *);
    void *(*jpegPtr)(gdImagePtr, int *, int);
    void (*free)(void *);
    gdImagePtr (*fromJpeg)(int, void *);
    gdImagePtr (*fromPng)(int, void *);
    gdImagePtr (*fromGif)(int, void *);
    gdImagePtr (*fromWebp)(int, void *);
} gd;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static fp_library_load loaded;

static void *symbol(void *library, const char *name) {
    return fp_library_symbol(&loaded, library, "libgd.so.3", name, "");
}

static void load(void) {
    void *library = fp_library_open(&loaded, NULL, "libgd.so.3");
    if (library == NULL) return;
    gd.createTrueColor = (gdImagePtr(*)(int, int))symbol(library, "gdImageCreateTrueColor");
    gd.destroy = (void (*)(gdImagePtr))symbol(library, "gdImageDestroy");
    gd.filledRectangle = (void (*)(gdImagePtr, int, int, int, int, int))symbol(library, "gdImageFilledRectangle");
    gd.alphaBlending = (void (*)(gdImagePtr, int))symbol(library, "gdImageAlphaBlending");
    gd.copyResampled = (void (*)(gdImagePtr, gdImagePtr, int, int, int, int, int, int, int, int))symbol(
        library, "gdImageCopyResampled");
    gd.setPixel = (void (*)(gdImagePtr, int, int, int))symbol(library, "gdImageSetPixel");
    gd.pngPtr = (void *(*)(gdImagePtr, int *))symbol(library, "gdImagePngPtr");
    gd.jpegPtr = (void *(*)(gdImagePtr, int *, int))symbol(library, "gdImageJpegPtr");
    gd.free = (void (*)(void *))symbol(library, "gdFree");
    gd.fromJpeg = (gdImagePtr(*)(int, void *))symbol(library, "gdImageCreateFromJpegPtr");
    gd.fromPng = (gdImagePtr(*)(int, void *))symbol(library, "gdImageCreateFromPngPtr");
    gd.fromGif = (gdImagePtr(*)(int, void *))symbol(library, "gdImageCreateFromGifPtr");
    gd.fromWebp = (gdImagePtr(*)(int, void *))symbol(library, "gdImageCreateFromWebpPtr");
}

const char *fp_gd_load_error(void) {
    pthread_once(&once, load);
    return loaded.failure;
}

gdImagePtr fp_gd_create_truecolor(int width, int height) { return gd.createTrueColor(width, height); }
void fp_gd_destroy(gdImagePtr image) { gd.destroy(image); }
int fp_gd_width(gdImagePtr image) { return gdImageSX(image); }
int fp_gd_height(gdImagePtr image) { return gdImageSY(image); }
int fp_gd_truecolor(int red, int green, int blue) { return gdTrueColor(red, green, blue); }
void fp_gd_filled_rectangle(gdImagePtr image, int x1, int y1, int x2, int y2, int color) {
    gd.filledRectangle(image, x1, y1, x2, y2, color);
}
void fp_gd_alpha_blending(gdImagePtr image, int blending) { gd.alphaBlending(image, blending); }
void fp_gd_copy_resampled(
    gdImagePtr target, gdImagePtr source, int targetX, int targetY, int sourceX, int sourceY, int targetWidth,
    int targetHeight, int sourceWidth, int sourceHeight) {
    gd.copyResampled(
        target, source, targetX, targetY, sourceX, sourceY, targetWidth, targetHeight, sourceWidth, sourceHeight);
}
void fp_gd_set_pixel(gdImagePtr image, int x, int y, int color) { gd.setPixel(image, x, y, color); }
void *fp_gd_png(gdImagePtr image, int *size) { return gd.pngPtr(image, size); }
void *fp_gd_jpeg(gdImagePtr image, int *size, int quality) { return gd.jpegPtr(image, size, quality); }
void fp_gd_free(void *bytes) { gd.free(bytes); }
gdImagePtr fp_gd_from_jpeg(int size, void *bytes) { return gd.fromJpeg(size, bytes); }
gdImagePtr fp_gd_from_png(int size, void *bytes) { return gd.fromPng(size, bytes); }
gdImagePtr fp_gd_from_gif(int size, void *bytes) { return gd.fromGif(size, bytes); }
gdImagePtr fp_gd_from_webp(int size, void *bytes) { return gd.fromWebp(size, bytes); }
