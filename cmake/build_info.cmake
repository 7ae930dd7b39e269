# Writes build_info.cpp only when its content changes, so an unchanged tree does not relink.
execute_process(COMMAND git -C ${SRC} rev-parse --short=12 HEAD
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND git -C ${SRC} status --porcelain --untracked-files=no
                OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit "unknown")
endif()
if(dirty)
  set(commit "${commit}-dirty")
endif()
set(content "namespace ffpa {\nconst char* build_commit() { return \"${commit}\"; }\nconst char* build_flags() { return \"${FLAGS}\"; }\nconst char* tool_version() { return \"${VERSION}\"; }\n}\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE ${OUT} "${content}")
endif()
