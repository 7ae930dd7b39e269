// Data files shipped with the tool (configs/, configs/grids/) are found from the working
// directory or from the source tree the executable was built in, so `build/ffpa-bench` works from
// any directory.
#pragma once

#include <string>

namespace ffpa {

// `relative` as given if it exists from the working directory, else the first existing match in
// the executable's ancestor directories, else `relative` unchanged (the caller reports it missing).
std::string find_data_path(const std::string& relative);

// $FFPA_GRIDS_DIR, else find_data_path("configs/grids").
std::string grids_dir();

}  // namespace ffpa
