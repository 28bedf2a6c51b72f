# Makes the test models (cmake -P script): the generated random models (remade
# when missing or written by a different build of the generator: stamp file),
# the q8-dequantized float copies of the outlier models (the reference that
# judges q8's arithmetic alone), the shipped trained model, unpacked, and its
# q4 checkpoint (qwen3-bpf-quantize: GPTQ on the committed calibration passages).
cmake_policy(SET CMP0007 NEW)  # keep the empty "extra flags" element of each spec

# Sets ${out} to TRUE when model directory NAME must be (re)made: it is missing,
# or its stamp file does not hold STAMP (what it was made from).
function(model_stale name stamp out)
  set(have "")
  if(EXISTS "${OUT}/${name}.stamp")
    file(READ "${OUT}/${name}.stamp" have)
  endif()
  if(NOT EXISTS "${OUT}/${name}/config.json" OR NOT have STREQUAL stamp)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

file(TIMESTAMP "${MKMODEL}" generator_stamp "%Y%m%d%H%M%S" UTC)
foreach(spec "tiny;tiny;1;" "tiny-outliers;tiny;1;--outliers" "small-outliers;small;2;--outliers")
  list(GET spec 0 name)
  list(GET spec 1 preset)
  list(GET spec 2 seed)
  list(GET spec 3 extra)
  model_stale(${name} "${generator_stamp}" stale)
  if(stale)
    message(STATUS "generating test model ${name}")
    file(REMOVE_RECURSE "${OUT}/${name}")
    execute_process(
      COMMAND ${MKMODEL} "${OUT}/${name}" --preset ${preset} --seed ${seed} ${extra}
              --tokenizer-dir ${TOKENIZER_DIR}
      RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "qwen3-bpf-mkmodel failed for ${name} (exit ${rc})")
    endif()
    file(WRITE "${OUT}/${name}.stamp" "${generator_stamp}")
  endif()
endforeach()

# <model>-q8-dequantized: every matrix as the engine's q8 conversion stores it, read back as float.
foreach(name tiny-outliers small-outliers)
  file(TIMESTAMP "${QUANT_STUDY}" study_stamp "%Y%m%d%H%M%S" UTC)
  model_stale(${name}-q8-dequantized "${generator_stamp}-${study_stamp}" stale)
  if(stale)
    message(STATUS "writing ${name}-q8-dequantized")
    file(REMOVE_RECURSE "${OUT}/${name}-q8-dequantized" "${OUT}/study")
    execute_process(
      COMMAND ${QUANT_STUDY} "${OUT}/${name}" engine --work "${OUT}/study" --prompts 1 --length 4
      OUTPUT_QUIET RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "qwen3-bpf-quant-study failed for ${name} (exit ${rc})")
    endif()
    file(RENAME "${OUT}/study/${name}-engine" "${OUT}/${name}-q8-dequantized")
    file(REMOVE_RECURSE "${OUT}/study")
    file(WRITE "${OUT}/${name}-q8-dequantized.stamp" "${generator_stamp}-${study_stamp}")
  endif()
endforeach()

# The shipped trained model, unpacked as "trained".
file(SHA256 "${TRAINED_TARBALL}" trained_sha)
model_stale(trained "${trained_sha}" stale)
if(stale)
  message(STATUS "unpacking the trained model")
  file(REMOVE_RECURSE "${OUT}/trained" "${OUT}/unpack")
  file(MAKE_DIRECTORY "${OUT}/unpack")
  file(ARCHIVE_EXTRACT INPUT "${TRAINED_TARBALL}" DESTINATION "${OUT}/unpack")
  file(GLOB unpacked LIST_DIRECTORIES true "${OUT}/unpack/*")
  file(RENAME "${unpacked}" "${OUT}/trained")
  file(REMOVE_RECURSE "${OUT}/unpack")
  file(WRITE "${OUT}/trained.stamp" "${trained_sha}")
endif()

# trained-q4: the shipped model rounded offline for precision = q4, as a user
# makes it (qwen3-bpf-quantize, the default recipe, the calibration passages
# of tools/quant_study that the accuracy tests' held-out text does not contain).
file(TIMESTAMP "${QUANTIZE}" quantize_stamp "%Y%m%d%H%M%S" UTC)
file(SHA256 "${CALIB_PASSAGES}" calib_sha)
model_stale(trained-q4 "${trained_sha}-${quantize_stamp}-${calib_sha}" stale)
if(stale)
  message(STATUS "quantizing trained-q4")
  file(REMOVE_RECURSE "${OUT}/trained-q4")
  execute_process(
    COMMAND ${QUANTIZE} "${OUT}/trained" "${OUT}/trained-q4" --calib-passages "${CALIB_PASSAGES}"
    OUTPUT_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "qwen3-bpf-quantize failed for trained-q4 (exit ${rc})")
  endif()
  file(WRITE "${OUT}/trained-q4.stamp" "${trained_sha}-${quantize_stamp}-${calib_sha}")
endif()
