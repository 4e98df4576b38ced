package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Machine describes where a run took place.
type Machine struct {
	CPUs      int       `json:"cpus"`
	CPUModel  string    `json:"cpu_model,omitempty"`
	MemoryMiB int64     `json:"memory_mib,omitempty"`
	OS        string    `json:"os"`
	Go        string    `json:"go"`
	Date      time.Time `json:"date"`
}

func thisMachine() Machine {
	m := Machine{
		CPUs: runtime.NumCPU(),
		OS:   runtime.GOOS + "/" + runtime.GOARCH,
		Go:   runtime.Version(),
		Date: time.Now().UTC().Truncate(time.Second),
	}
	if v, ok := procField("/proc/cpuinfo", "model name"); ok {
		m.CPUModel = v
	}
	if v, ok := procField("/proc/meminfo", "MemTotal"); ok {
		if kib, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64); err == nil {
			m.MemoryMiB = kib / 1024
		}
	}
	return m
}

// procField returns the value of the first "name: value" line of a /proc
// file.
func procField(path, name string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// peakRSSKiB is the peak resident memory (VmHWM) of process pid, or 0 where
// /proc is missing.
func peakRSSKiB(pid string) int64 {
	v, ok := procField("/proc/"+pid+"/status", "VmHWM")
	if !ok {
		return 0
	}
	kib, _ := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
	return kib
}

// clockTicks is the unit of the CPU times of /proc/PID/stat (USER_HZ, 100
// on every Linux architecture Go supports).
const clockTicks = 100

// cpuTime is the CPU time (user and system) process pid used so far; pid
// "self" is this process.
func cpuTime(pid string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: the fields
	// after it start with the state (field 3); utime and stime are
	// fields 14 and 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%s/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: unexpected format", pid)
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%s/stat: unexpected format", pid)
	}
	return time.Duration(user+sys) * time.Second / clockTicks, nil
}

// selfCPU is the CPU time (user and system) this process used so far, to
// the microsecond (getrusage), or 0 where that is not available.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
