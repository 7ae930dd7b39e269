// Data files shipped with the tool (configs/, configs/grids/) are found from the working
// directory or from the source tree the executable was built in, so `build/ffpa-bench` works from
// any directory.
#pragma once

#include <string>

namespace ffpa {

// `relative` as given if it exists from the working directory or does not start with configs/;
// else the first existing match in the executable's ancestor directories, else `relative`
// unchanged (the caller reports it missing).
std::string find_data_path(const std::string& relative);

// Where the cubin and tuning caches live: $XDG_CACHE_HOME/ffpa-bench (a relative value is taken
// from the working directory), else $HOME/.cache/ffpa-bench; empty without either.
std::string cache_root();

// $FFPA_GRIDS_DIR, else find_data_path("configs/grids").
std::string grids_dir();

}  // namespace ffpa
