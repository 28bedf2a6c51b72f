# Generates the test models (cmake -P script). A model is regenerated when it is
# missing or was written by a different build of the generator (stamp file).
cmake_policy(SET CMP0007 NEW)  # keep the empty "extra flags" element of each spec
file(TIMESTAMP "${MKMODEL}" generator_stamp "%Y%m%d%H%M%S" UTC)
foreach(spec "tiny;tiny;1;" "tiny-outliers;tiny;1;--outliers" "small-outliers;small;2;--outliers")
  list(GET spec 0 name)
  list(GET spec 1 preset)
  list(GET spec 2 seed)
  list(GET spec 3 extra)
  set(stamp_file "${OUT}/${name}.stamp")
  set(have_stamp "")
  if(EXISTS "${stamp_file}")
    file(READ "${stamp_file}" have_stamp)
  endif()
  if(NOT EXISTS "${OUT}/${name}/config.json" OR NOT have_stamp STREQUAL generator_stamp)
    message(STATUS "generating test model ${name}")
    file(REMOVE_RECURSE "${OUT}/${name}")
    execute_process(
      COMMAND ${MKMODEL} "${OUT}/${name}" --preset ${preset} --seed ${seed} ${extra}
              --tokenizer-dir ${TOKENIZER_DIR}
      RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "qwen3-bpf-mkmodel failed for ${name} (exit ${rc})")
    endif()
    file(WRITE "${stamp_file}" "${generator_stamp}")
  endif()
endforeach()
