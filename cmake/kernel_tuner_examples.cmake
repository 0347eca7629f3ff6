# Kernel Tuner's own examples (../shared/kernel_tuner_examples, unchanged) as T1 problems:
# examples/kernel_tuner/{opencl,cuda}/*.json name the kernel files there. vector_add's kernel is
# a string inside its Python script, so configuring writes it out as it is, into
# <build>/kernel_tuner_examples/{opencl,cuda}/vector_add.{cl,cu}, beside the problem
# (vector_add.json, from vector_add.json.in) that names it. Nothing is written when the examples
# are absent.
get_filename_component(KT_EXAMPLES "${PROJECT_SOURCE_DIR}/../shared/kernel_tuner_examples" ABSOLUTE)
set(KT_EXAMPLE_PROBLEMS "${PROJECT_BINARY_DIR}/kernel_tuner_examples")
foreach(kt_lang opencl cuda)
  set(kt_script "${KT_EXAMPLES}/${kt_lang}/vector_add.py")
  if(NOT EXISTS "${kt_script}")
    continue()
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${kt_script}"
               "${PROJECT_SOURCE_DIR}/examples/kernel_tuner/${kt_lang}/vector_add.json.in")
  file(READ "${kt_script}" kt_text)
  # the text between kernel_string = """ and the next """
  string(FIND "${kt_text}" "kernel_string = \"\"\"" kt_at)
  if(kt_at LESS 0)
    message(FATAL_ERROR "${kt_script}: no kernel_string = \"\"\" ... \"\"\" found")
  endif()
  math(EXPR kt_at "${kt_at} + 19")
  string(SUBSTRING "${kt_text}" ${kt_at} -1 kt_rest)
  string(FIND "${kt_rest}" "\"\"\"" kt_end)
  string(SUBSTRING "${kt_rest}" 0 ${kt_end} kt_kernel)
  if(kt_lang STREQUAL "opencl")
    set(kt_ext cl)
  else()
    set(kt_ext cu)
  endif()
  set(KT_VECTOR_ADD_DIR "${KT_EXAMPLE_PROBLEMS}/${kt_lang}")
  file(WRITE "${KT_VECTOR_ADD_DIR}/vector_add.${kt_ext}" "${kt_kernel}")
  configure_file("${PROJECT_SOURCE_DIR}/examples/kernel_tuner/${kt_lang}/vector_add.json.in"
                 "${KT_VECTOR_ADD_DIR}/vector_add.json" @ONLY)
endforeach()
