// The image part (namespace ingest::image, CMake target ingest::image, needs
// libjpeg-turbo and libspng): JPEG and PNG decoding, JPEG encoding, decode-time
// RandomResizedCrop, resizing and the transforms (crops, padding, flips,
// cutout, rotation, normalisation) of uint8 [H, W, C] Tensors. Never included
// by <ingest/ingest.hpp>; include this, or one header of ingest/image/.
#pragma once

#include "ingest/image/crop.hpp"
#include "ingest/image/decode.hpp"
#include "ingest/image/encode.hpp"
#include "ingest/image/flip.hpp"
#include "ingest/image/jpeg.hpp"
#include "ingest/image/normalize.hpp"
#include "ingest/image/png.hpp"
#include "ingest/image/random_resized_crop.hpp"
#include "ingest/image/resize.hpp"
#include "ingest/image/rotate.hpp"
#include "ingest/image/types.hpp"
