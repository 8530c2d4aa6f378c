# Installs ingest into a scratch prefix (find_package mode) or points at its
# source tree (add_subdirectory mode), then configures, builds and runs the
# consumer project. Run with cmake -P.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()

set(consumer_args -DCMAKE_CXX_COMPILER=${CXX} -G ${GENERATOR})
if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/ingest-build -G ${GENERATOR}
      -DCMAKE_CXX_COMPILER=${CXX} -DINGEST_BUILD_TESTS=OFF -DINGEST_BUILD_BENCH=OFF
      -DINGEST_BUILD_EXAMPLES=OFF -DINGEST_BUILD_TOOLS=OFF -DCMAKE_INSTALL_PREFIX=${WORK_DIR}/prefix)
  run(${CMAKE_COMMAND} --install ${WORK_DIR}/ingest-build)
  list(APPEND consumer_args -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DINGEST_CONSUMER_MODE=find_package)
else()
  list(APPEND consumer_args -DINGEST_SOURCE_DIR=${SOURCE_DIR} -DINGEST_CONSUMER_MODE=add_subdirectory)
endif()
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/package -B ${WORK_DIR}/consumer-build ${consumer_args})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer-build)
run(${WORK_DIR}/consumer-build/consumer)
if(EXISTS ${WORK_DIR}/consumer-build/cuda_consumer)
  run(${WORK_DIR}/consumer-build/cuda_consumer)
  message(STATUS "cuda_consumer (${MODE}) built and ran")
endif()
if(EXISTS ${WORK_DIR}/consumer-build/image_consumer)
  run(${WORK_DIR}/consumer-build/image_consumer ${SOURCE_DIR}/tests/fixtures/image/jpeg/rgb420_17x13.jpg
      ${SOURCE_DIR}/tests/fixtures/image/png/palette_trns.png)
  message(STATUS "image_consumer (${MODE}) built and ran")
endif()
if(EXISTS ${WORK_DIR}/consumer-build/remote_consumer)
  run(${WORK_DIR}/consumer-build/remote_consumer)
  message(STATUS "remote_consumer (${MODE}) built and ran")
endif()
if(EXISTS ${WORK_DIR}/consumer-build/torch_consumer)
  run(${WORK_DIR}/consumer-build/torch_consumer)
  message(STATUS "torch_consumer (${MODE}) built and ran")
endif()
message(STATUS "consumer (${MODE}) built and ran")
