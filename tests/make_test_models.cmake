# Generates the test models unless they already exist (cmake -P script).
cmake_policy(SET CMP0007 NEW)  # keep the empty "extra flags" element of each spec
foreach(spec "tiny;tiny;1;" "tiny-outliers;tiny;1;--outliers" "small-outliers;small;2;--outliers")
  list(GET spec 0 name)
  list(GET spec 1 preset)
  list(GET spec 2 seed)
  list(GET spec 3 extra)
  if(NOT EXISTS "${OUT}/${name}/config.json")
    message(STATUS "generating test model ${name}")
    execute_process(
      COMMAND ${MKMODEL} "${OUT}/${name}" --preset ${preset} --seed ${seed} ${extra}
              --tokenizer-dir ${TOKENIZER_DIR}
      RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "qwen3-bpf-mkmodel failed for ${name} (exit ${rc})")
    endif()
  endif()
endforeach()
