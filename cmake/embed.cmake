# Writes the text of file IN as a C array named NAME (NUL-terminated) into file OUT:
#   cmake -DIN=ops/gemm.cu -DOUT=gemm_cu.c -DNAME=ktops_gemm_cu -P cmake/embed.cmake
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}.tmp" "/* generated from ${IN} by cmake/embed.cmake */\nconst char ${NAME}[] = {\n${bytes}0x00};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
