# A fuzz ctest (cm.mad_fuzz, roce.packet_fuzz) with libFuzzer: fuzz a copy of
# the committed corpus for MAX_TOTAL_TIME seconds, so the corpus in git stays
# as it is (libFuzzer adds the inputs it finds to the directory it runs on).
# Crash inputs are written into WORK_DIR too.
#   cmake -DFUZZER=... -DCORPUS=... -DWORK_DIR=... -DNAME=... -DMAX_TOTAL_TIME=20 -P run_fuzz.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(COPY ${CORPUS}/ DESTINATION ${WORK_DIR}/corpus)
execute_process(
  COMMAND ${FUZZER} -max_total_time=${MAX_TOTAL_TIME} -print_final_stats=1
          -artifact_prefix=${WORK_DIR}/ ${WORK_DIR}/corpus
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${NAME} failed (${result}); the input is in ${WORK_DIR}")
endif()
