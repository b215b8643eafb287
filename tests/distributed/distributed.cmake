# tests/distributed: the process group and the collective ops across processes. One binary with
# its own main (distributed::init_world() before the tests), run as one process (every case
# with N = 1, and the groups-do-not-match errors) and, when MPI is built in and mpiexec found,
# as two processes under mpiexec.
add_executable(test_distributed ${CMAKE_CURRENT_LIST_DIR}/distributed_test.cpp
                                ${CMAKE_CURRENT_LIST_DIR}/main.cpp
                                ${CMAKE_CURRENT_LIST_DIR}/train_step_test.cpp)
target_compile_options(test_distributed PRIVATE ${TLALOC_WARNINGS})
target_link_libraries(test_distributed PRIVATE tlaloc_test_support GTest::gtest)
add_test(NAME distributed.one_process COMMAND test_distributed)
set_tests_properties(distributed.one_process PROPERTIES TIMEOUT 120)
if(TLALOC_HAVE_MPI AND MPIEXEC_EXECUTABLE)
  # --oversubscribe: two ranks on a machine that may have fewer free cores; as root in
  # containers OpenMPI also needs --allow-run-as-root.
  add_test(NAME distributed.mpi_2_processes
           COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root
                   ${MPIEXEC_NUMPROC_FLAG} 2 $<TARGET_FILE:test_distributed>)
  set_tests_properties(distributed.mpi_2_processes PROPERTIES TIMEOUT 120
    ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1;OMP_NUM_THREADS=1")
endif()
