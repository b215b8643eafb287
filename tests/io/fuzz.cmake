# Included by tests/CMakeLists.txt. libFuzzer target for the safetensors reader (tests/io/fuzz),
# built with clang as a separate project when clang++ can link
# -fsanitize=fuzzer,address,undefined (the main build may use g++); a short bounded run is a
# test. scripts/fuzz-safetensors.sh SECONDS runs it for longer.
option(TLALOC_FUZZ "Build the libFuzzer targets when clang++ supports them" ON)
find_program(TLALOC_CLANGXX NAMES clang++ clang++-14)
if(TLALOC_FUZZ AND TLALOC_CLANGXX)
  set(probe ${CMAKE_CURRENT_BINARY_DIR}/fuzz_probe)
  file(WRITE ${probe}.cpp "#include <cstdint>\n#include <cstddef>\nextern \"C\" int "
       "LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
  execute_process(COMMAND ${TLALOC_CLANGXX} -fsanitize=fuzzer,address,undefined ${probe}.cpp
                          -o ${probe} RESULT_VARIABLE probe_rc OUTPUT_QUIET ERROR_QUIET)
  if(probe_rc EQUAL 0)
    include(ExternalProject)
    set(fuzz_bin ${CMAKE_CURRENT_BINARY_DIR}/io/fuzz)
    ExternalProject_Add(fuzz_safetensors
      SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}/fuzz
      BINARY_DIR ${fuzz_bin}
      CMAKE_ARGS -DCMAKE_CXX_COMPILER=${TLALOC_CLANGXX}
                 -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
      BUILD_ALWAYS ON
      INSTALL_COMMAND ""
      # the nested configure / build talk into log files, printed only when a step fails
      LOG_CONFIGURE ON
      LOG_BUILD ON
      LOG_OUTPUT_ON_FAILURE ON)
    add_test(NAME io.fuzz_safetensors_bounded
      COMMAND sh -c "rm -rf corpus && mkdir corpus && ./fuzz_safetensors -runs=20000 -seed=1 \
        -dict=${CMAKE_CURRENT_LIST_DIR}/fuzz/safetensors.dict corpus \
        ${CMAKE_CURRENT_LIST_DIR}/fuzz_corpus"
      WORKING_DIRECTORY ${fuzz_bin})
    set_tests_properties(io.fuzz_safetensors_bounded PROPERTIES TIMEOUT 120)
  else()
    message(STATUS "clang++ cannot build libFuzzer targets: the safetensors fuzzer is not built")
  endif()
endif()
