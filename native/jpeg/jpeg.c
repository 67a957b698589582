// The optional native JPEG decoder (core/multimodal/native-jpeg.ts): libjpeg-turbo's own
// decompressor, called on the pool thread that asked, into memory the caller passes or a new
// buffer. It decodes exactly as Pillow does (Pillow calls the same library with the same
// defaults: the accurate integer IDCT, fancy upsampling, no colour profile), in less time than
// sharp takes, whose libvips pipeline adds copies of every row and fresh pages for its output
// (docs/performance.md, "JPEG decoding without libvips").
//
//   decode(bytes, maxPixels[, into[, firstRow, endRow]]) -> { width, height, rgb } or a string
//     (throws a TypeError or RangeError only for arguments that break this contract)
//     bytes     a Uint8Array holding the whole JPEG file
//     maxPixels refuse (a string) a larger image before decoding it
//     into      optional Uint8Array of at least width * height * 3 bytes: the RGB rows are
//               written there (row y at y * width * 3) and `rgb` is that view; else a new one
//     firstRow, endRow  optional: decode only rows [firstRow, endRow) (into `into` at their
//               place); libjpeg-turbo skips the rows before firstRow without their IDCT
//   A string answer is the reason the image was left to sharp: not 8-bit gray or
//   YCbCr/RGB (CMYK and YCCK are sharp's), more pixels than maxPixels, no memory for a new
//   array, or any error or warning
//   libjpeg raised (a truncated or corrupt file): sharp then decodes it, or refuses it with
//   the message an operator sees, so the two paths accept and refuse the same files.
//
// Only libjpeg-turbo (jpeg_skip_scanlines; the accurate IDCT Pillow's reference uses).
#include <math.h>
#include <node_api.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <jpeglib.h>

#ifndef LIBJPEG_TURBO_VERSION
#error "native/jpeg needs libjpeg-turbo's jpeglib.h"
#endif

typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
} error_mgr;

static void on_error(j_common_ptr c) {
  error_mgr* e = (error_mgr*)c->err;
  (*c->err->format_message)(c, e->message);
  longjmp(e->jump, 1);
}

// A warning (corrupt data, a premature end) ends the decode here too: sharp judges the file.
static void on_message(j_common_ptr c, int level) {
  if (level < 0) on_error(c);
}

static napi_value string_value(napi_env env, const char* text) {
  napi_value out;
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &out);
  return out;
}

static int typed_bytes(napi_env env, napi_value value, unsigned char** data, size_t* length) {
  napi_typedarray_type type;
  napi_value ab;
  size_t offset;
  if (napi_get_typedarray_info(env, value, &type, length, (void**)data, &ab, &offset) != napi_ok || type != napi_uint8_array) return 0;
  return 1;
}

static napi_value decode(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  unsigned char* src;
  size_t src_length;
  double max_pixels;
  if (argc < 2 || !typed_bytes(env, argv[0], &src, &src_length) || napi_get_value_double(env, argv[1], &max_pixels) != napi_ok || !(max_pixels >= 0)) {
    napi_throw_type_error(env, NULL, "decode(bytes: Uint8Array, maxPixels: number[, into: Uint8Array[, firstRow, endRow]])");
    return NULL;
  }
  unsigned char* into = NULL;
  size_t into_length = 0;
  napi_valuetype into_type = napi_undefined;
  if (argc >= 3) napi_typeof(env, argv[2], &into_type);
  if (into_type != napi_undefined && !typed_bytes(env, argv[2], &into, &into_length)) {
    napi_throw_type_error(env, NULL, "into: expected a Uint8Array");
    return NULL;
  }
  double first_row = 0, end_row = -1;
  if (argc == 4 || (argc >= 5 && (!into || napi_get_value_double(env, argv[3], &first_row) != napi_ok || napi_get_value_double(env, argv[4], &end_row) != napi_ok ||
                                  !isfinite(first_row) || !isfinite(end_row) || first_row < 0 || end_row < first_row))) {
    napi_throw_type_error(env, NULL, "firstRow, endRow: expected both, whole numbers with 0 <= firstRow <= endRow, and `into`");
    return NULL;
  }

  struct jpeg_decompress_struct cinfo;
  error_mgr err;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = on_error;
  err.pub.emit_message = on_message;
  err.message[0] = 0;
  // Read after the jump: a longjmp may leave non-volatile locals in registers stale.
  volatile int created = 0;
  if (setjmp(err.jump)) {
    if (created) jpeg_destroy_decompress(&cinfo);
    char text[JMSG_LENGTH_MAX + 16];
    snprintf(text, sizeof text, "libjpeg: %s", err.message);
    return string_value(env, text);
  }
  jpeg_create_decompress(&cinfo);
  created = 1;
  jpeg_mem_src(&cinfo, src, (unsigned long)src_length);
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.data_precision != 8) {
    jpeg_destroy_decompress(&cinfo);
    return string_value(env, "not 8-bit");
  }
  if (!(cinfo.num_components == 1 && cinfo.jpeg_color_space == JCS_GRAYSCALE) &&
      !(cinfo.num_components == 3 && (cinfo.jpeg_color_space == JCS_YCbCr || cinfo.jpeg_color_space == JCS_RGB))) {
    jpeg_destroy_decompress(&cinfo);
    return string_value(env, "not gray, YCbCr or RGB");
  }
  double pixels = (double)cinfo.image_width * (double)cinfo.image_height;
  if (pixels > max_pixels) {
    jpeg_destroy_decompress(&cinfo);
    return string_value(env, "more pixels than allowed");
  }
  // Pillow's defaults, spelled out: the accurate integer IDCT and fancy upsampling.
  cinfo.out_color_space = JCS_RGB;
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&cinfo);
  size_t width = cinfo.output_width, height = cinfo.output_height, stride = width * 3;
  // Checked above: finite, 0 <= first_row <= end_row, or end_row -1 (the whole image).
  size_t first = first_row > (double)height ? height : (size_t)first_row;
  size_t end = end_row < 0 || end_row > (double)height ? height : (size_t)end_row;
  if (first > end) first = end;
  unsigned char* out;
  napi_value rgb;
  if (into) {
    if (into_length < stride * height) {
      jpeg_destroy_decompress(&cinfo);
      napi_throw_range_error(env, NULL, "into: smaller than width * height * 3 bytes");
      return NULL;
    }
    out = into;
    rgb = argv[2];
  } else {
    void* data;
    napi_value ab;
    if (napi_create_arraybuffer(env, stride * height, &data, &ab) != napi_ok) {
      // Left to sharp, which allocates its own (and answers for it).
      jpeg_destroy_decompress(&cinfo);
      bool pending = false;
      napi_is_exception_pending(env, &pending);
      if (pending) {
        napi_value ignored;
        napi_get_and_clear_last_exception(env, &ignored);
      }
      return string_value(env, "cannot allocate the decoded image");
    }
    napi_create_typedarray(env, napi_uint8_array, stride * height, ab, 0, &rgb);
    out = data;
  }
  if (first > 0) jpeg_skip_scanlines(&cinfo, (JDIMENSION)first);
  while (cinfo.output_scanline < end) {
    JSAMPROW rows[8];
    int n = 0;
    for (; n < 8 && cinfo.output_scanline + n < end; n++) rows[n] = out + (size_t)(cinfo.output_scanline + n) * stride;
    jpeg_read_scanlines(&cinfo, rows, (JDIMENSION)n);
  }
  if (end == height) jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  created = 0;
  napi_value obj, w, h;
  napi_create_object(env, &obj);
  napi_create_double(env, (double)width, &w);
  napi_create_double(env, (double)height, &h);
  napi_set_named_property(env, obj, "width", w);
  napi_set_named_property(env, obj, "height", h);
  napi_set_named_property(env, obj, "rgb", rgb);
  return obj;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "decode", NAPI_AUTO_LENGTH, decode, NULL, &fn);
  napi_set_named_property(env, exports, "decode", fn);
  return exports;
}
