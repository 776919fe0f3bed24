# Warnings and sanitizers, applied per target through orch_target_defaults().
function(orch_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  # Errors where a warning means a bug: a switch over a kind that misses one (switches over kinds
  # have no `default:`, so a new kind stops the build at every switch that must handle it), a
  # function that falls off its end, an unmarked fallthrough, an ignored [[nodiscard]] result.
  target_compile_options(${target} PRIVATE -Werror=switch -Werror=return-type
                                           -Werror=implicit-fallthrough -Werror=unused-result)
  if(ORCH_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
  if(ORCH_FUZZ)
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link,address,undefined)
  endif()
endfunction()
