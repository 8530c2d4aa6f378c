# ISA-L (Intel's Intelligent Storage Acceleration Library, Debian:
# libisal-dev): its igzip inflate reads GZIP and ZLIB files 1.4 to 3 times
# as fast as zlib (ingest/formats/compression.hpp). Both ingest's own build
# and the installed ingestConfig.cmake include this file, so a consumer
# finds it as the build did. Sets INGEST_ISAL_FOUND and, when found, the
# imported target ingest_deps::isal.
set(INGEST_ISAL_FOUND FALSE)
find_path(INGEST_ISAL_INCLUDE_DIR isa-l/igzip_lib.h)
find_library(INGEST_ISAL_LIBRARY isal)
if(INGEST_ISAL_INCLUDE_DIR AND INGEST_ISAL_LIBRARY)
  set(INGEST_ISAL_FOUND TRUE)
  if(NOT TARGET ingest_deps::isal)
    add_library(ingest_deps::isal UNKNOWN IMPORTED)
    set_target_properties(ingest_deps::isal PROPERTIES
                          IMPORTED_LOCATION "${INGEST_ISAL_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${INGEST_ISAL_INCLUDE_DIR}"
                          INTERFACE_COMPILE_DEFINITIONS INGEST_HAVE_ISAL=1)
  endif()
endif()
