# Sourced by scripts/test.sh and scripts/fuzz.sh: compiles through ccache
# (Debian's ccache; scripts/install-deps.sh installs it) when it is there.
#
# The cache is shared by every clone on the machine: CCACHE_BASEDIR is the
# clone's root, so ccache rewrites the absolute paths under it to relative
# ones before hashing, and CCACHE_NOHASHDIR leaves the working directory out
# of the hash (it is in the sanitizer builds' line tables). A clone of the
# same commit in another folder then compiles to the same commands (the
# tests pass their paths through a generated source, tests/support/paths.hpp,
# and group their files with relative includes) and every object is a hit.
# The precompiled headers are cached too (the sloppiness ccache needs for
# them: their macros and time stamps), and where a <pch>.sum lies beside one
# (clang's, cmake/pch-sum.sh) ccache hashes the sum, which names no folder.
# Depend mode takes the headers a unit read from the compiler's dependency
# file (every build here writes one), so a miss costs one compiler run, not a
# preprocessor run as well.
#
#   INGEST_CCACHE=0   build without it
#   CCACHE_DIR        where the cache lives (ccache's default: ~/.cache/ccache)
#   CCACHE_MAXSIZE    its bound (default here 10G: four configurations' objects)
if [ "${INGEST_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null 2>&1; then
  CCACHE_BASEDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  export CCACHE_BASEDIR
  export CCACHE_NOHASHDIR=true
  export CCACHE_DEPEND=true
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  export CCACHE_PCH_EXTSUM=true
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-10G}
  # Read by CMake (3.17 and later) as the launchers' defaults, in this build
  # and in the projects the packaging tests configure.
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CMAKE_CUDA_COMPILER_LAUNCHER=ccache
  ingest_ccache=1
else
  ingest_ccache=0
fi
