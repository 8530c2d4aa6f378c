# The pkg-config file (ingest.pc) and the Debian package (cpack -G DEB) of
# ingest: headers, the CMake package, ingest.pc and the `ingest` tool in one
# package, libingest-dev (docs/packaging.md). Included from the top-level
# CMakeLists.txt after the install rules.

# ingest.pc: the core's flags. Relocatable (${pcfiledir}), so the file is the
# same under /usr/local (cmake --install) and /usr (the .deb).
set(_ingest_pc_requires "zlib")
set(_ingest_pc_cflags "-pthread")
if(INGEST_ISAL)
  string(APPEND _ingest_pc_requires " libisal")
  string(APPEND _ingest_pc_cflags " -DINGEST_HAVE_ISAL=1")
endif()
set(_ingest_pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(IS_ABSOLUTE "${_ingest_pc_dir}")
  file(RELATIVE_PATH _ingest_pc_up "${_ingest_pc_dir}" "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _ingest_pc_up "/prefix/${_ingest_pc_dir}" "/prefix")
endif()
string(REGEX REPLACE "/$" "" _ingest_pc_up "${_ingest_pc_up}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(_ingest_pc_includedir "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(_ingest_pc_includedir "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/ingest.pc @ONLY CONTENT [=[
prefix=${pcfiledir}/@_ingest_pc_up@
includedir=@_ingest_pc_includedir@

Name: ingest
Description: @PROJECT_DESCRIPTION@ (compile with -std=c++20 or later)
Version: @PROJECT_VERSION@
Requires: @_ingest_pc_requires@
Cflags: -I${includedir} @_ingest_pc_cflags@
Libs: -pthread
]=])
install(FILES ${PROJECT_BINARY_DIR}/ingest.pc DESTINATION ${_ingest_pc_dir})

# The Debian package. Depends: what every consumer's compile needs (the
# core's headers and libraries); Recommends: the optional parts this build
# installed; Suggests: what helps without being needed.
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "libingest-dev")
set(CPACK_PACKAGE_VENDOR "ingest")
set(CPACK_PACKAGE_CONTACT "ingest maintainers <maintainers@users.noreply.a-seed-3444b920.example>")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "ingest reads, transforms and batches training data on the CPU (TFRecord, CSV, images, "
       "local files and object stores), overlapped with the training step, as tf.data does.\n"
       "This package holds the C++20 headers, the CMake package (find_package(ingest)), the "
       "pkg-config file ingest.pc and the `ingest` command-line tool for TFRecord files.")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "libdevel")
# The tool's shared libraries (libc, libstdc++, zlib, ISA-L), by dpkg-shlibdeps.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(_ingest_deb_depends "zlib1g-dev" "libboost-dev (>= 1.74)")
if(INGEST_ISAL)
  list(APPEND _ingest_deb_depends "libisal-dev")
endif()
set(_ingest_deb_recommends "")
if(dlpack_FOUND)
  list(APPEND _ingest_deb_recommends "libdlpack-dev")
endif()
if(INGEST_IMAGE)
  list(APPEND _ingest_deb_recommends "libjpeg62-turbo-dev" "libspng-dev")
endif()
if(INGEST_REMOTE)
  list(APPEND _ingest_deb_recommends "libssl-dev")
endif()
set(_ingest_deb_suggests "cmake (>= 3.25)" "pkgconf")
if(INGEST_TORCH)
  list(APPEND _ingest_deb_suggests "libtorch-dev")
endif()
list(JOIN _ingest_deb_depends ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
list(JOIN _ingest_deb_recommends ", " CPACK_DEBIAN_PACKAGE_RECOMMENDS)
list(JOIN _ingest_deb_suggests ", " CPACK_DEBIAN_PACKAGE_SUGGESTS)
include(CPack)
