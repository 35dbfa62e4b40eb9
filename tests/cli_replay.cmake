# make-problem -> run --problem --out twice -> identical result files.
set(P ${DIR}/cli_replay_problem.safetensors)
foreach(step IN ITEMS
    "make-problem;--preset;v4-pro;--rows;6;--context;900;--k;32;--generator;specials;--out;${P}"
    "run;--problem;${P};--out;${DIR}/cli_replay_a.safetensors;--logits"
    "run;--problem;${P};--out;${DIR}/cli_replay_b.safetensors;--logits;--threads;1")
  execute_process(COMMAND ${CLI} ${step} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "flashindexer ${step} failed (${rc}): ${out}${err}")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${DIR}/cli_replay_a.safetensors
                        ${DIR}/cli_replay_b.safetensors RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "replays of the same problem file differ")
endif()
