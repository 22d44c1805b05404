# Keyway — build, test and install. `make help` lists the targets.
SWIFT ?= swift
SHELL := /bin/bash
# What the build and `make demo` use: the C toolchain and pkgconf beside Swift, the libraries keyway and keywayd link,
# and the demo's pamtester under pam_wrapper. No server and nothing that starts a service (no sshd, fprintd, X,
# PostgreSQL): installed without Recommends. Everything else is for the tests (`make check`).
DEMO_PACKAGES := pkgconf gcc libc6-dev libstdc++-12-dev make binutils libsodium-dev libsqlite3-dev libpq-dev libpam0g-dev libqrencode-dev \
	libdbus-1-dev libfido2-dev pamtester libpam-wrapper
TEST_PACKAGES := postgresql-15 pgbouncer qrencode oathtool sqlite3 sudo passwd login bc file python3-prometheus-client \
	fuse3 libfuse3-dev openssh-server openssh-client \
	valgrind bsdextrautils procps util-linux systemd tmux \
	dbus-daemon dbus-bin fprintd libfprint-2-2 libpam-fprintd python3-dbus python3-dbusmock \
	fido2-tools libssl-dev libpam-u2f pamu2fcfg \
	libx11-dev libcairo2-dev xvfb xdotool x11-utils x11-xserver-utils xss-lock imagemagick
APT_PACKAGES := $(DEMO_PACKAGES) $(TEST_PACKAGES)

PREFIX ?= /usr/local
# Where Debian keeps PAM modules (/lib/x86_64-linux-gnu/security on amd64); gcc knows the multiarch name.
MULTIARCH := $(shell gcc -print-multiarch 2>/dev/null)
PAM_DIR ?= $(if $(MULTIARCH),/lib/$(MULTIARCH)/security,/lib/security)

.PHONY: help deps demo-deps build module cli daemon harness lint test test-kill harden check demo install uninstall deb test-deb bench bench-quick fuzz print-pam-dir clean

help:
	@echo "make demo       install deps, build, enroll a throwaway user, authenticate through real PAM (no system file changed)"
	@echo "make check      everything CI runs: make test, make test-kill, make harden (~15 min from a fresh clone)"
	@echo "make test-kill  SIGKILL/SIGINT the system-touching tests at random points; the system stays as found"
	@echo "make test       install deps, check the layout, build, and run the test suite (~4 min)"
	@echo "make harden     ASan test suite, ASan+UBSan C host, valgrind over 1,000 module cycles, every fuzz target"
	@echo "make lint       swift format lint (settings in .swift-format); imports checked against Package.swift"
	@echo "make module     build/pam_keyway.so, the deployable PAM module (Embedded Swift: libc and libpam only)"
	@echo "make cli        build/keyway, the command line"
	@echo "make daemon     build/keywayd, the daemon that owns the store"
	@echo "make lock       build/keyway-lock, the X11 lock screen"
	@echo "make install    install the module, the CLI, keywayd and its systemd units, man pages, /etc/keyway, /var/lib/keyway"
	@echo "make uninstall  remove what make install installed (the store is kept)"
	@echo "make deb        build/keyway_VERSION_ARCH.deb with debhelper (debian/); install with apt install ./build/keyway_*.deb"
	@echo "make test-deb   build the .deb, lintian, install it, pam-auth-update, real sudo, remove, purge (root; CI runs it)"
	@echo "make bench      Benchmarks/run: every figure beside its reference, one table (root; ~4 min)"
	@echo "make bench-quick every section of Benchmarks/run with few samples; fails naming a broken section"
	@echo "make fuzz       fuzz the parsers of hostile input with libFuzzer + ASan (FUZZ_SECONDS=60)"

# Installs only what is missing, so repeated runs stay fast and offline-friendly: PACKAGES, then apt-get's options.
define apt_install
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) $$missing; \
	fi
endef

deps: demo-deps
	$(call apt_install,$(TEST_PACKAGES))

demo-deps:
	$(call apt_install,$(DEMO_PACKAGES),--no-install-recommends)

build: deps
	$(SWIFT) build

# The deployable module, in Embedded Swift: libc and libpam only (scripts/build-module.sh). `swift build` still
# compiles the same sources in full mode (the pam_keyway product), so both modes are built on every change.
module: demo-deps
	SWIFTC="$(dir $(shell command -v $(SWIFT)))swiftc" scripts/build-module.sh

# Full RELRO for the release binaries (bound at start, GOT read-only), as Debian's hardening flags ask.
RELEASE_LINK := -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now

cli: demo-deps
	$(SWIFT) build -c release --product keyway --disable-local-rpath --static-swift-stdlib $(RELEASE_LINK)
	@mkdir -p build
	cp .build/release/keyway build/keyway.new && mv -f build/keyway.new build/keyway

daemon: demo-deps
	$(SWIFT) build -c release --product keywayd --disable-local-rpath --static-swift-stdlib $(RELEASE_LINK)
	@mkdir -p build
	@# renamed into place: a running keywayd keeps its old file (a plain cp would fail, "text file busy")
	cp .build/release/keywayd build/keywayd.new && mv -f build/keywayd.new build/keywayd

lock: deps
	$(SWIFT) build -c release --product keyway-lock --disable-local-rpath --static-swift-stdlib $(RELEASE_LINK)
	@mkdir -p build
	cp .build/release/keyway-lock build/keyway-lock.new && mv -f build/keyway-lock.new build/keyway-lock

# A C host over the real libpam, for the PAM tests and the benchmark.
harness: pam/tests/harness.c pam/tests/count-getenv.c Benchmarks/count-hash.c Tests/SoftKeyShim/softkey_shim.c \
		Tests/XProbe/x-probe.c
	@mkdir -p build
	$(CC) -O2 -Wall -Wextra -o build/x-probe Tests/XProbe/x-probe.c -lX11
	$(CC) -O2 -Wall -Wextra -o build/pam-harness pam/tests/harness.c -lpam -ldl
	$(CC) -O2 -Wall -Wextra -shared -fPIC -o build/count-getenv.so pam/tests/count-getenv.c -ldl
	$(CC) -O2 -Wall -Wextra -shared -fPIC -o build/count-hash.so Benchmarks/count-hash.c -ldl
	$(CC) -O2 -Wall -Wextra -shared -fPIC -I Tests/SoftKeyShim/include -o build/softkey-shim.so \
		Tests/SoftKeyShim/softkey_shim.c -ldl

# Layout is checked, not argued about: .swift-format holds the settings (4 spaces, 120 columns). The import graph is
# checked against Package.swift, and the check is shown to fail on a wrong import (scripts/package-graph.py).
lint:
	$(SWIFT) format lint --strict -r Sources Plugins pam Tests
	SWIFTC="$(dir $(shell command -v $(SWIFT)))swiftc" scripts/package-graph.py check
	SWIFTC="$(dir $(shell command -v $(SWIFT)))swiftc" scripts/package-graph.py self-test
	scripts/doc-names.py check
	scripts/doc-names.py self-test

# The suite runs in a private mount namespace where /etc, /tmp, /run, /dev and the login records are copies
# (scripts/test-isolated.sh): a run killed midway cannot leave a user or a sudoers entry behind. It ends by checking
# that the real files are as it found them.
test: deps lint module cli daemon lock harness build/promtool
	$(SWIFT) build --build-tests
	scripts/test-isolated.sh bash -c 'scripts/test-install.sh && \
		$(SWIFT) test --skip-build --parallel 2>&1 | tee .build/test-output.txt | \
		grep -vE "^(◇|\[[0-9]+/[0-9]+\]|Test Case .* started)"; exit $${PIPESTATUS[0]}'

# promtool alone, to check the alert rules keywayd(8) and the guide give: unpacked from Debian's prometheus package,
# not installed, so no Prometheus server is started on the machine.
build/promtool:
	@mkdir -p build/prometheus-deb
	cd build/prometheus-deb && { apt-get download prometheus 2>/dev/null || { apt-get update -qq && apt-get download prometheus; }; }
	dpkg-deb -x build/prometheus-deb/prometheus_*.deb build/prometheus-deb/root
	cp build/prometheus-deb/root/usr/bin/promtool build/promtool.new && mv -f build/promtool.new build/promtool
	rm -rf build/prometheus-deb

# Kills the system-touching tests at random points, then shows the system unchanged (scripts/test-kill.sh).
test-kill: deps module cli daemon harness
	$(SWIFT) build --build-tests
	scripts/test-kill.sh

# Sanitizers, valgrind and the fuzz targets over the real module (scripts/harden.sh, docs/HARDENING.md).
harden: deps module cli daemon harness
	$(SWIFT) build --build-tests
	scripts/test-isolated.sh scripts/harden.sh

# Everything CI runs (.ci/run): the suite, then the hardening.
# Every test: the suite, the kill tests, the hardening suite, then the Debian package end to end (it installs and
# purges the package for real, with /etc a private copy; scripts/test-deb.sh says what it changes and restores).
check: test test-kill harden test-deb bench-quick

# A real PAM authentication through pamtester under pam_wrapper, with a throwaway store: no system file changes.
demo: demo-deps module cli daemon
	@scripts/demo.sh

UNIT_DIR ?= $(PREFIX)/lib/systemd/system

install: module cli daemon lock
	install -D -m 644 -o root -g root build/pam_keyway.so $(DESTDIR)$(PAM_DIR)/pam_keyway.so
	install -D -m 755 -o root -g root build/keyway-lock $(DESTDIR)$(PREFIX)/bin/keyway-lock
	install -D -m 644 man/keyway-lock.1 $(DESTDIR)$(PREFIX)/share/man/man1/keyway-lock.1
	# keyway in bin: users run it for their own factors (keyway(8)); an older install's sbin copy is replaced.
	install -D -m 755 -o root -g root build/keyway $(DESTDIR)$(PREFIX)/bin/keyway
	rm -f $(DESTDIR)$(PREFIX)/sbin/keyway
	install -D -m 755 -o root -g root build/keywayd $(DESTDIR)$(PREFIX)/sbin/keywayd
	install -D -m 644 man/pam_keyway.8 $(DESTDIR)$(PREFIX)/share/man/man8/pam_keyway.8
	install -D -m 644 man/keyway.8 $(DESTDIR)$(PREFIX)/share/man/man8/keyway.8
	install -D -m 644 man/keywayd.8 $(DESTDIR)$(PREFIX)/share/man/man8/keywayd.8
	install -D -m 644 systemd/keywayd.socket $(DESTDIR)$(UNIT_DIR)/keywayd.socket
	sed 's|@SBINDIR@|$(PREFIX)/sbin|' systemd/keywayd.service.in > build/keywayd.service
	install -D -m 644 build/keywayd.service $(DESTDIR)$(UNIT_DIR)/keywayd.service
	install -D -m 644 systemd/keyway.catalog $(DESTDIR)$(PREFIX)/lib/systemd/catalog/keyway.catalog
	@if [ -z "$(DESTDIR)" ] && command -v journalctl >/dev/null; then journalctl --update-catalog || true; fi
	install -D -m 644 man/keyway.conf.5 $(DESTDIR)$(PREFIX)/share/man/man5/keyway.conf.5
	build/keyway completion bash > build/keyway.bash
	install -D -m 644 build/keyway.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/keyway
	install -d -m 755 -o root -g root $(DESTDIR)/etc/keyway
	install -d -m 700 -o root -g root $(DESTDIR)/var/lib/keyway
	install -D -m 644 -t $(DESTDIR)$(PREFIX)/share/doc/keyway/examples/keyway.conf man/examples/*.conf
	install -D -m 644 -t $(DESTDIR)$(PREFIX)/share/doc/keyway/examples pam/examples/*
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
		systemctl daemon-reload && systemctl enable --now keywayd.socket && echo "Enabled keywayd.socket."; \
	else \
		echo "systemd is not running here: start '$(PREFIX)/sbin/keywayd --foreground' as root from your init system."; \
	fi
	@echo "Installed. Next: keyway enroll gesture --user USER, then see the examples in $(PREFIX)/share/doc/keyway/examples"

# Refuses while a PAM stack still uses the module it would remove (by name, or by its path in the system module
# directory; another copy named by its own path does not count), listing those lines: removing it would break them.
uninstall:
	@if scripts/pam-stacks-using.sh $(DESTDIR)/etc/pam.d $(PAM_DIR) >&2; then \
		echo "refusing: the lines above use $(PAM_DIR)/pam_keyway.so; remove them first (nothing was removed)" >&2; \
		exit 1; fi
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
		systemctl disable --now keywayd.socket keywayd.service 2>/dev/null || true; fi
	rm -f $(DESTDIR)$(PAM_DIR)/pam_keyway.so $(DESTDIR)$(PREFIX)/bin/keyway $(DESTDIR)$(PREFIX)/sbin/keyway \
		$(DESTDIR)$(PREFIX)/sbin/keywayd
	rm -f $(DESTDIR)$(PREFIX)/bin/keyway-lock $(DESTDIR)$(PREFIX)/share/man/man1/keyway-lock.1
	rm -f $(DESTDIR)$(PREFIX)/share/man/man8/pam_keyway.8 $(DESTDIR)$(PREFIX)/share/man/man8/keyway.8
	rm -f $(DESTDIR)$(PREFIX)/share/man/man8/keywayd.8 $(DESTDIR)$(PREFIX)/share/man/man5/keyway.conf.5
	rm -f $(DESTDIR)$(UNIT_DIR)/keywayd.socket $(DESTDIR)$(UNIT_DIR)/keywayd.service $(DESTDIR)$(PREFIX)/share/bash-completion/completions/keyway
	rm -f $(DESTDIR)$(PREFIX)/lib/systemd/catalog/keyway.catalog
	rm -rf $(DESTDIR)$(PREFIX)/share/doc/keyway
	@if [ ! -e $(DESTDIR)/etc/keyway ]; then :; \
	elif rmdir $(DESTDIR)/etc/keyway 2>/dev/null; then echo "Removed $(DESTDIR)/etc/keyway (it was empty)."; \
	else echo "Kept $(DESTDIR)/etc/keyway: it holds your configuration ($$(ls -A $(DESTDIR)/etc/keyway | tr '\n' ' ' | sed 's/ $$//')); delete it yourself if you mean to."; \
	fi
	@echo "Kept $(DESTDIR)/var/lib/keyway (the enrollments); delete it yourself if you mean to."

# The Debian package, built by Debian's tools from debian/. Swift is not a Debian package, so the binaries are compiled
# here first (the targets above) and debian/rules only packages build/; everything lands in build/, not in `..`.
DEB_VERSION = $(shell dpkg-parsechangelog -S Version 2>/dev/null)
DEB_ARCH = $(shell dpkg-architecture -qDEB_HOST_ARCH 2>/dev/null)
deb: module cli daemon lock
	$(call apt_install,debhelper dpkg-dev)
	dpkg-buildpackage -b -us -uc \
		--buildinfo-option=-ubuild --buildinfo-file=build/keyway_$(DEB_VERSION)_$(DEB_ARCH).buildinfo \
		--changes-option=-ubuild --changes-file=build/keyway_$(DEB_VERSION)_$(DEB_ARCH).changes
	@echo "Built build/keyway_$(DEB_VERSION)_$(DEB_ARCH).deb and build/keyway-lock_$(DEB_VERSION)_$(DEB_ARCH).deb:" \
		"apt install ./build/keyway_$(DEB_VERSION)_$(DEB_ARCH).deb (and ./build/keyway-lock_... for the lock screen)"

# The package end to end (scripts/test-deb.sh): installs and purges it for real (dpkg state), with /etc a private copy.
test-deb: deps
	scripts/test-deb.sh

# libFuzzer with AddressSanitizer over the parsers of hostile input (Tests/KeywayFuzz), FUZZ_SECONDS long.
FUZZ_SECONDS ?= 60
fuzz: deps
	$(SWIFT) build --scratch-path .build/fuzz --product keyway-fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING
	@mkdir -p build/fuzz-corpus
	@printf '\0001-2-3-6-9' > build/fuzz-corpus/pattern; printf '\001present alice right-index' > build/fuzz-corpus/sensor
	.build/fuzz/debug/keyway-fuzz -max_total_time=$(FUZZ_SECONDS) build/fuzz-corpus

print-pam-dir:
	@echo $(PAM_DIR)

bench: deps module cli daemon harness
	Benchmarks/run

# Every section of Benchmarks/run with few samples: fails, naming the section and the command, when one breaks.
bench-quick: deps module cli daemon harness
	Benchmarks/run --quick

clean:
	$(SWIFT) package clean
	rm -rf build
