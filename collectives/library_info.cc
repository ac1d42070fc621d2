// library_info.cc: identifies libstrata.so (`strings libstrata.so | grep strata-version`); the API
// itself comes from strata_core, linked whole into the shared library.
#include "strata/strata.h"

#define STRATA_STR2(x) #x
#define STRATA_STR(x) STRATA_STR2(x)
extern "C" __attribute__((visibility("default"), used)) const char strataLibraryVersion[] =
    "strata-version " STRATA_STR(STRATA_VERSION_MAJOR) "." STRATA_STR(STRATA_VERSION_MINOR) "." STRATA_STR(
        STRATA_VERSION_PATCH);
