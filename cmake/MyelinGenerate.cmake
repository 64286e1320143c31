# myelin_generate(TARGET <target> [IMPLEMENTS <header>...] [CALLS <header>...]
#                 [REMOTE_NAMESPACE <name>])
# Runs myelin-gen over the headers and adds the generated sources to the
# target: IMPLEMENTS for classes the program serves, CALLS for classes it
# calls on its peer. Classes deriving from myelin::CommonEndpointClass, in
# either list, are served and get a proxy <name>::<class> for calling the
# peer's (REMOTE_NAMESPACE, default `remote`; may be nested, like a::b).
# Generated files land in the target's binary dir.
# Fails the configure step with instructions if MYELIN_GEN_PYTHON cannot
# import libclang's bindings.
function(myelin_check_generator)
  execute_process(COMMAND "${MYELIN_GEN_PYTHON}" -c "import clang.cindex"
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "myelin-gen needs a Python with libclang, and '${MYELIN_GEN_PYTHON}' has none. "
                        "Create one with: python3 -m venv <dir> && <dir>/bin/pip install -r "
                        "${MYELIN_GEN_DIR}/requirements.txt, then pass -DMYELIN_GEN_PYTHON=<dir>/bin/python "
                        "(./scripts/test.sh does this for the source tree).")
  endif()
endfunction()

function(myelin_generate)
  cmake_parse_arguments(MG "" "TARGET;REMOTE_NAMESPACE" "IMPLEMENTS;CALLS" ${ARGN})
  if(NOT MG_TARGET)
    message(FATAL_ERROR "myelin_generate: TARGET is required")
  endif()
  if(NOT MG_IMPLEMENTS AND NOT MG_CALLS)
    message(FATAL_ERROR "myelin_generate(${MG_TARGET}): name at least one header in IMPLEMENTS or CALLS")
  endif()
  set(outdir "${CMAKE_CURRENT_BINARY_DIR}/myelin_gen/${MG_TARGET}")
  set(args "")
  set(headers "")
  set(outputs "")
  foreach(role IMPLEMENTS CALLS)
    foreach(h IN LISTS MG_${role})
      get_filename_component(abs "${h}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      get_filename_component(stem "${abs}" NAME_WE)
      string(TOLOWER "${role}" flag)
      list(APPEND args "--${flag}" "${abs}")
      list(APPEND headers "${abs}")
      list(APPEND outputs "${outdir}/${stem}_gen.h" "${outdir}/${stem}_gen.cpp")
    endforeach()
  endforeach()
  if("REMOTE_NAMESPACE" IN_LIST MG_KEYWORDS_MISSING_VALUES)
    message(FATAL_ERROR "myelin_generate(${MG_TARGET}): REMOTE_NAMESPACE needs a namespace name, like remote or peer::api")
  endif()
  if(DEFINED MG_REMOTE_NAMESPACE)  # not if(MG_...): a namespace may be called `n` or `off`
    list(APPEND args --remote-namespace "${MG_REMOTE_NAMESPACE}")
  endif()
  # The options are a dependency too, so that changing them regenerates with
  # every generator (Makefiles do not compare command lines); CONFIGURE
  # rewrites the file only when its content changes.
  set(options_file "${outdir}/.options")
  file(CONFIGURE OUTPUT "${options_file}" CONTENT "remote-namespace=${MG_REMOTE_NAMESPACE}\n")
  file(GLOB gen_sources CONFIGURE_DEPENDS "${MYELIN_GEN_DIR}/myelin_gen/*.py")
  set(stamp "${outdir}/.stamp")
  set(depfile "${outdir}/.deps")
  list(GET outputs 0 first_output)
  set(incs "$<TARGET_PROPERTY:${MG_TARGET},INCLUDE_DIRECTORIES>")
  set(core_incs "$<TARGET_PROPERTY:myelin::core,INTERFACE_INCLUDE_DIRECTORIES>")
  set(defs "$<TARGET_PROPERTY:${MG_TARGET},COMPILE_DEFINITIONS>")
  add_custom_command(
    OUTPUT ${outputs} ${stamp}
    COMMAND "${MYELIN_GEN_PYTHON}" "${MYELIN_GEN_DIR}/myelin-gen" --out-dir "${outdir}" ${args}
            --depfile-stamp "${stamp}" --depfile "${depfile}" --depfile-target "${first_output}"
            --system-includes-from "${CMAKE_CXX_COMPILER}" --
            -std=c++20 "$<$<BOOL:${incs}>:-I$<JOIN:${incs},;-I>>" "-I$<JOIN:${core_incs},;-I>"
            "$<$<BOOL:${defs}>:-D$<JOIN:${defs},;-D>>"
    DEPENDS ${headers} ${gen_sources} "${MYELIN_GEN_DIR}/myelin-gen" "${options_file}"
    DEPFILE "${depfile}"
    COMMENT "myelin-gen for ${MG_TARGET}"
    COMMAND_EXPAND_LISTS VERBATIM)
  list(FILTER outputs INCLUDE REGEX "\\.cpp$")
  target_sources(${MG_TARGET} PRIVATE ${outputs})
  target_include_directories(${MG_TARGET} PRIVATE "${outdir}")
  target_link_libraries(${MG_TARGET} PRIVATE myelin::core)
endfunction()
