# Fake PJRT plugins that tests/runtime/pjrt loads with dlopen (see fake_plugin.cc).
foreach(mode_name "0;no_api" "1;old_api" "2;ok" "3;device")
  list(GET mode_name 0 mode)
  list(GET mode_name 1 name)
  add_library(fake_pjrt_${name} MODULE ${CMAKE_CURRENT_LIST_DIR}/fake_plugin.cc
                                       ${CMAKE_CURRENT_LIST_DIR}/fake_device.cc)
  target_compile_definitions(fake_pjrt_${name} PRIVATE FAKE_MODE=${mode})
  target_include_directories(fake_pjrt_${name} PRIVATE ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_LIST_DIR})
  set_target_properties(fake_pjrt_${name} PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests/fake_pjrt)
  if(TARGET test_runtime_pjrt)
    add_dependencies(test_runtime_pjrt fake_pjrt_${name})
  endif()
endforeach()
