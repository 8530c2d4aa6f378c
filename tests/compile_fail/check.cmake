# Compiles SOURCE, which must fail with the message on its first line
# ("// expect: ...") and at most MAX_ERRORS lines of errors in all: a common
# mistake must read as its static_assert, not as pages of template errors.
file(STRINGS "${SOURCE}" first LIMIT_COUNT 1)
string(REGEX REPLACE "^// expect: " "" expected "${first}")
separate_arguments(flags UNIX_COMMAND "${FLAGS}")
execute_process(COMMAND "${CXX}" ${flags} -fsyntax-only "${SOURCE}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled; it must fail with: ${expected}")
endif()
string(FIND "${out}" "${expected}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${SOURCE}: the compiler did not say \"${expected}\":\n${out}")
endif()
string(REGEX MATCHALL "error:" errors "${out}")
list(LENGTH errors count)
if(count GREATER MAX_ERRORS)
  message(FATAL_ERROR "${SOURCE}: ${count} errors (at most ${MAX_ERRORS}):\n${out}")
endif()
message(STATUS "${SOURCE}: ${count} error(s), with the expected message")
