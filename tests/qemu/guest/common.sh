# SPDX-License-Identifier: MIT
# Guest-side helpers, sourced before each test script inside the QEMU guest.
# shellcheck shell=sh

# PCI address of the (first) NVMe controller
nvme_bdf() {
	for d in /sys/bus/pci/devices/*; do
		if [ "$(cat "$d/class")" = 0x010802 ]; then
			basename "$d"
			return 0
		fi
	done
	return 1
}

# hand the controller to gstore_nvme (what `gstore nvme bind` does)
gs_bind() {
	echo gstore_nvme >"/sys/bus/pci/devices/$1/driver_override" || return 1
	if [ -e "/sys/bus/pci/devices/$1/driver" ]; then
		echo "$1" >"/sys/bus/pci/devices/$1/driver/unbind" || return 1
	fi
	echo "$1" >/sys/bus/pci/drivers/gstore_nvme/bind
}

# give it back: clear the override and let the kernel pick a driver
gs_unbind() {
	echo "$1" >/sys/bus/pci/drivers/gstore_nvme/unbind || return 1
	echo >"/sys/bus/pci/devices/$1/driver_override"
	echo "$1" >/sys/bus/pci/drivers_probe
}

load_nvme() {
	for m in $(cat /mod/nvme.order); do
		insmod "/mod/$m" 2>/dev/null
	done
	return 0
}

fail() {
	echo "FAIL $*"
	exit 1
}

# seconds since the guest booted (whole seconds: /proc/uptime)
uptime_s() {
	read -r up _ </proc/uptime
	echo "${up%.*}"
}

# wait_for WORD FILE: until FILE (a client's output) says WORD; fail after 20 s
# of the guest's clock (a count of tries is no bound: under TCG on a loaded host
# one grep can take a tenth of a second)
wait_for() {
	end=$(($(uptime_s) + 20))
	while ! grep -q "$1" "$2"; do
		if [ "$(uptime_s)" -ge $end ]; then
			cat "$2"
			fail "no '$1' in $2 after 20 s"
		fi
		usleep 10000
	done
}
