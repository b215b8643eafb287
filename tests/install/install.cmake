# Included by tests/CMakeLists.txt. install.example: `cmake --install` of this build into a
# scratch prefix, then examples/ configured against it with find_package(tlaloc), built (with
# -Wall -Wextra -Werror) and run (example.sh).
add_test(NAME install.example COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/example.sh)
set_tests_properties(install.example PROPERTIES TIMEOUT 600 ENVIRONMENT
  "TLALOC_SOURCE_DIR=${PROJECT_SOURCE_DIR};TLALOC_BINARY_DIR=${PROJECT_BINARY_DIR};\
CMAKE_COMMAND=${CMAKE_COMMAND};CMAKE_GENERATOR=${CMAKE_GENERATOR};\
TLALOC_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER};CXX=${CMAKE_CXX_COMPILER}")
