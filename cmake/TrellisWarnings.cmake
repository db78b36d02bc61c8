# Warnings and sanitizers, applied to our own targets only (never to dependencies, whose
# headers come in as SYSTEM includes). TRELLIS_WERROR=ON (CI) makes every warning an error.
function(trellis_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  if(TRELLIS_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(TRELLIS_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${TRELLIS_SANITIZE} -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=${TRELLIS_SANITIZE})
  endif()
endfunction()
