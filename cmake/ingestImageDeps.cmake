# The image part's dependencies (ingest::image): libjpeg-turbo's libjpeg API
# (jpeglib.h; Debian: libjpeg62-turbo-dev) and libspng (libspng-dev). Both
# ingest's own build and the installed ingestConfig.cmake include this file,
# so a consumer finds them exactly as the build did. Sets
# INGEST_IMAGE_DEPS_FOUND, INGEST_IMAGE_DEPS_MISSING (what is missing, in
# words), INGEST_LIBJPEG_TURBO_VERSION and, when found, the imported targets
# JPEG::JPEG and spng::spng.
set(INGEST_IMAGE_DEPS_FOUND FALSE)
set(INGEST_IMAGE_DEPS_MISSING "")

find_package(JPEG QUIET)
# jpeg_crop_scanline and jpeg_skip_scanlines (decode_and_crop_jpeg) are
# libjpeg-turbo extensions; 2.0 fixed their bugs with upsampled chroma.
set(_ingest_turbo_version 0)
if(JPEG_FOUND)
  find_file(INGEST_JCONFIG_H jconfig.h PATHS ${JPEG_INCLUDE_DIRS}
            PATH_SUFFIXES ${CMAKE_LIBRARY_ARCHITECTURE} NO_CACHE)
  if(INGEST_JCONFIG_H)
    file(STRINGS "${INGEST_JCONFIG_H}" _ingest_turbo_line REGEX "#define[ \t]+LIBJPEG_TURBO_VERSION_NUMBER")
    string(REGEX MATCH "[0-9]+" _ingest_turbo_version "${_ingest_turbo_line}")
    file(STRINGS "${INGEST_JCONFIG_H}" _ingest_turbo_line REGEX "#define[ \t]+LIBJPEG_TURBO_VERSION[ \t]")
    string(REGEX MATCH "[0-9.]+$" INGEST_LIBJPEG_TURBO_VERSION "${_ingest_turbo_line}")
  endif()
endif()
if(NOT JPEG_FOUND OR NOT _ingest_turbo_version OR _ingest_turbo_version LESS 2000000)
  list(APPEND INGEST_IMAGE_DEPS_MISSING "libjpeg-turbo >= 2.0 (libjpeg62-turbo-dev)")
endif()

find_path(INGEST_SPNG_INCLUDE_DIR spng.h)
find_library(INGEST_SPNG_LIBRARY spng)
if(NOT INGEST_SPNG_INCLUDE_DIR OR NOT INGEST_SPNG_LIBRARY)
  list(APPEND INGEST_IMAGE_DEPS_MISSING "libspng (libspng-dev)")
endif()

if(NOT INGEST_IMAGE_DEPS_MISSING)
  set(INGEST_IMAGE_DEPS_FOUND TRUE)
  if(NOT TARGET spng::spng)
    add_library(spng::spng UNKNOWN IMPORTED)
    set_target_properties(spng::spng PROPERTIES IMPORTED_LOCATION "${INGEST_SPNG_LIBRARY}"
                                                INTERFACE_INCLUDE_DIRECTORIES "${INGEST_SPNG_INCLUDE_DIR}")
  endif()
endif()
list(JOIN INGEST_IMAGE_DEPS_MISSING ", " INGEST_IMAGE_DEPS_MISSING)
unset(_ingest_turbo_line)
unset(_ingest_turbo_version)
