# Sourced by the build scripts. When ccache is installed, compile through it
# with paths taken relative to the checkout, so that a clone in another
# folder (CI's) reuses what an earlier build compiled. Sets CCACHE_LAUNCHER
# to the CMake arguments (empty without ccache): ccache is only an
# accelerator; nothing requires it.
CCACHE_LAUNCHER=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
  CCACHE_LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
