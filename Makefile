# SPDX-License-Identifier: MIT
# gstore top-level build.  `make help` lists the targets.
#
#   make            build libgstore, the tools and the tests (and .cu files if nvcc exists)
#   make check      build and run every test (tests/run.sh; exit 77 = skip)
#   make asan check the same under ASan/UBSan (build-asan/)
#   make tsan check-tsan   the ring and cache tests under TSan (build-tsan/)
#   make deps       install missing Debian packages
#   make demo       format an image, import example data, mount it, show it
#   make bench      run the benchmarks (see docs/PERF.md)
#   make install    binaries, man pages, mount helper under $(PREFIX)

PREFIX ?= /usr/local
DESTDIR ?=
CC ?= cc
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
WERROR ?= -Werror

SAN :=
ifneq ($(filter asan,$(MAKECMDGOALS)),)
SAN := asan
endif
ifneq ($(filter tsan check-tsan,$(MAKECMDGOALS)),)
SAN := tsan
endif

ifeq ($(SAN),asan)
B ?= build-asan
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
else ifeq ($(SAN),tsan)
B ?= build-tsan
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
else
B ?= build
SANFLAGS :=
endif

CPPFLAGS += -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Iinclude -Iuapi -Ilib -I. \
	    $(shell pkg-config --cflags fuse3 2>/dev/null)
CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 -Wall -Wextra $(WERROR) -Wno-unused-parameter -pthread -MMD -MP $(SANFLAGS)
LDFLAGS += -pthread $(SANFLAGS)
LDLIBS += -luring -lm
TEST_LDLIBS := -lcmocka

# libgstore: every .c of the library layers (fs core, object types, cache, I/O core)
LIB_SRCS := $(sort $(wildcard lib/*.c gpuq/*.c cache/*.c fs/*.c fs/graph/*.c fs/graph/apps/*.c \
			     fs/nd/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/%.o)
LIB := $(B)/libgstore.a
# the FUSE front end (fs/fuse/) is the daemon's, not the library's: only gstorefs links it
FUSE_SRCS := $(sort $(wildcard fs/fuse/*.c))
FUSE_OBJS := $(FUSE_SRCS:%.c=$(B)/%.o)
FUSE_LIB := $(B)/libgstorefs.a

# programs: bin/NAME.c or bin/NAME/*.c -> $(B)/bin/NAME
PROG_SINGLE := $(patsubst bin/%.c,%,$(wildcard bin/*.c))
PROG_DIRS := $(patsubst bin/%/,%,$(sort $(dir $(wildcard bin/*/*.c))))
PROGS := $(addprefix $(B)/bin/,$(PROG_SINGLE) $(PROG_DIRS))

# tests: cmocka units tests/unit/MOD/test_*.c, C integration programs tests/*/t_*.c
UNIT_SRCS := $(wildcard tests/unit/*/test_*.c)
UNIT_BINS := $(UNIT_SRCS:%.c=$(B)/%)
ITEST_SRCS := $(wildcard tests/integration/t_*.c tests/helpers/*.c)
ITEST_BINS := $(ITEST_SRCS:%.c=$(B)/%)

# CUDA: every .cu compiles (sm_90) wherever nvcc exists, GPU or not
CU_SRCS := $(shell find . -name '*.cu' -not -path './build*' -not -path './.gpudeps/*' 2>/dev/null)
CU_OBJS := $(CU_SRCS:./%.cu=$(B)/cuda/%.o)
ifneq ($(NVCC),)
ALL_CU := $(CU_OBJS)
endif

.PHONY: all check asan tsan check-tsan deps demo bench install clean help cuda lib progs tests kmod
all: $(LIB) $(PROGS) $(UNIT_BINS) $(ITEST_BINS) $(ALL_CU)
lib: $(LIB)
progs: $(PROGS)
tests: $(UNIT_BINS) $(ITEST_BINS)
cuda: $(CU_OBJS)

$(B)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(LIB): $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

$(FUSE_LIB): $(FUSE_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

$(B)/bin/gstorefs: $(B)/bin/gstorefs.o $(FUSE_LIB) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(FUSE_LIB) $(LIB) $(LDLIBS) -lfuse3

$(B)/bin/%: $(B)/bin/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# objects of bin/NAME/*.c live under $(B)/o/: $(B)/bin/NAME is the program itself
$(B)/o/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

define prog_dir_rule
$(B)/bin/$(1): $(patsubst %.c,$(B)/o/%.o,$(wildcard bin/$(1)/*.c)) $(LIB)
	@mkdir -p $$(@D)
	$$(CC) $$(LDFLAGS) -o $$@ $$(filter %.o,$$^) $(LIB) $$(LDLIBS)
endef
$(foreach p,$(PROG_DIRS),$(eval $(call prog_dir_rule,$(p))))

$(B)/tests/%: $(B)/tests/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS) $(TEST_LDLIBS)

$(B)/cuda/%.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) -arch=sm_90 -std=c++17 -Iinclude -Iuapi -Ilib -I. -Xcompiler -Wall -c -o $@ $<

# tools named as helpers: mkfs.gstore / fsck.gstore are links to gstore
links: $(PROGS)
	@if [ -x $(B)/bin/gstore ]; then ln -sf gstore $(B)/bin/mkfs.gstore; \
		ln -sf gstore $(B)/bin/fsck.gstore; fi
all: links

check: all
	B=$(B) tests/run.sh

asan:
	@:
tsan:
	@:
# TSan covers the lock-free and concurrent core: only those tests are built
TSAN_TESTS ?= unit/gpuq unit/cache unit/nvme unit/fs/test_concurrent
TSAN_BINS := $(filter $(addprefix $(B)/tests/,$(TSAN_TESTS) $(addsuffix /%,$(TSAN_TESTS))),$(UNIT_BINS))
check-tsan: $(TSAN_BINS)
	B=$(B) TESTS_FILTER='$(TSAN_TESTS)' tests/run.sh

deps:
	scripts/deps.sh

demo: deps
	$(MAKE) all
	scripts/demo.sh

bench: all
	bench/run-all.sh

kmod:
	$(MAKE) -C kmod

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/share/man
	for p in $(PROGS); do install -m 755 $$p $(DESTDIR)$(PREFIX)/bin/; done
	ln -sf $(PREFIX)/bin/gstore $(DESTDIR)$(PREFIX)/sbin/mkfs.gstore
	ln -sf $(PREFIX)/bin/gstore $(DESTDIR)$(PREFIX)/sbin/fsck.gstore
	-ln -sf $(PREFIX)/bin/gstorefs $(DESTDIR)$(PREFIX)/sbin/mount.gstorefs
	for s in 1 3 4 5 7 8; do \
		install -d $(DESTDIR)$(PREFIX)/share/man/man$$s; \
		for m in man/man$$s/*.$$s; do [ -e "$$m" ] && install -m 644 $$m $(DESTDIR)$(PREFIX)/share/man/man$$s/; done; \
	done; true

clean:
	rm -rf build build-asan build-tsan
	-$(MAKE) -C kmod clean 2>/dev/null

help:
	@sed -n '2,12p' Makefile

-include $(shell find $(B) -name '*.d' 2>/dev/null)
.SECONDARY:
