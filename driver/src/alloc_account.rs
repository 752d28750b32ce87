//! The allocator's own account of its memory, read inside this process through the
//! allocator's own interface. The interface is looked up at run time (dlsym), so a preloaded
//! and a linked allocator are read the same way: jemalloc's `mallctl` statistics, gperftools
//! tcmalloc's `MallocExtension` numeric properties (gperftools' and Google's), mimalloc's process info (mimalloc 2.0 has
//! no count of live bytes: it says so), and glibc's `mallinfo2`.

use serde_json::{json, Value};
use std::ffi::{c_char, c_int, c_void, CStr};

type Mallctl =
    unsafe extern "C" fn(*const c_char, *mut c_void, *mut usize, *mut c_void, usize) -> c_int;
type TcProperty = unsafe extern "C" fn(*const c_char, *mut usize) -> c_int;
type GoogleProperty = unsafe extern "C" fn(*const c_char, usize, *mut usize) -> bool;
type MiProcessInfo = unsafe extern "C" fn(
    *mut usize,
    *mut usize,
    *mut usize,
    *mut usize,
    *mut usize,
    *mut usize,
    *mut usize,
    *mut usize,
);

fn sym(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with RTLD_DEFAULT only looks a name up in the loaded objects.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

/// What the allocator of this process says about its memory: `live_bytes` (handed out to the
/// program and not yet freed), `resident_bytes` (what the allocator holds in memory), and the
/// allocator's own fields; `null` where it offers no such number.
pub fn read() -> Value {
    if let Some(f) = sym(c"mallctl") {
        // SAFETY: mallctl has this signature in every jemalloc that exports it unprefixed.
        return jemalloc(unsafe { std::mem::transmute::<*mut c_void, Mallctl>(f) });
    }
    if let Some(f) = sym(c"MallocExtension_Internal_GetNumericProperty") {
        // SAFETY: Google's TCMalloc (internal_malloc_extension.h): name, its length, value.
        return tcmalloc_google(unsafe { std::mem::transmute::<*mut c_void, GoogleProperty>(f) });
    }
    if let Some(f) = sym(c"MallocExtension_GetNumericProperty") {
        // SAFETY: gperftools' C interface (malloc_extension_c.h).
        return tcmalloc(unsafe { std::mem::transmute::<*mut c_void, TcProperty>(f) });
    }
    if let Some(f) = sym(c"mi_process_info") {
        // SAFETY: mimalloc's mi_process_info (mimalloc.h, 1.7 and later).
        return mimalloc(unsafe { std::mem::transmute::<*mut c_void, MiProcessInfo>(f) });
    }
    glibc()
}

fn jemalloc(mallctl: Mallctl) -> Value {
    let get = |name: &CStr| -> Option<u64> {
        let mut v: usize = 0;
        let mut len = std::mem::size_of::<usize>();
        // SAFETY: reads one size_t statistic into `v`.
        let rc = unsafe {
            mallctl(
                name.as_ptr(),
                &mut v as *mut usize as *mut c_void,
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        (rc == 0).then_some(v as u64)
    };
    // statistics are a snapshot taken when the epoch advances
    let mut epoch: u64 = 1;
    // SAFETY: writes one u64 to "epoch", as jemalloc's manual says.
    unsafe {
        mallctl(
            c"epoch".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut epoch as *mut u64 as *mut c_void,
            std::mem::size_of::<u64>(),
        )
    };
    let allocated = get(c"stats.allocated");
    json!({
        "allocator": "jemalloc", "source": "mallctl stats.*",
        "live_bytes": allocated, "resident_bytes": get(c"stats.resident"),
        "allocated": allocated, "active": get(c"stats.active"), "resident": get(c"stats.resident"),
        "mapped": get(c"stats.mapped"), "retained": get(c"stats.retained"),
    })
}

fn tcmalloc(prop: TcProperty) -> Value {
    let get = |name: &CStr| -> Option<u64> {
        let mut v: usize = 0;
        // SAFETY: writes one size_t; returns non-zero when the property exists.
        (unsafe { prop(name.as_ptr(), &mut v) } != 0).then_some(v as u64)
    };
    let heap = get(c"generic.heap_size");
    let unmapped = get(c"tcmalloc.pageheap_unmapped_bytes");
    json!({
        "allocator": "tcmalloc", "source": "MallocExtension numeric properties",
        "live_bytes": get(c"generic.current_allocated_bytes"),
        "resident_bytes": heap.map(|h| h.saturating_sub(unmapped.unwrap_or(0))),
        "heap_size": heap, "pageheap_free_bytes": get(c"tcmalloc.pageheap_free_bytes"),
        "pageheap_unmapped_bytes": unmapped,
    })
}

fn tcmalloc_google(prop: GoogleProperty) -> Value {
    let get = |name: &str| -> Option<u64> {
        let mut v: usize = 0;
        // SAFETY: reads `name` (not NUL-terminated: its length is passed) and writes one size_t.
        (unsafe { prop(name.as_ptr() as *const c_char, name.len(), &mut v) }).then_some(v as u64)
    };
    json!({
        "allocator": "tcmalloc-google", "source": "MallocExtension numeric properties (Google's TCMalloc)",
        "live_bytes": get("generic.current_allocated_bytes"),
        "resident_bytes": get("generic.physical_memory_used"),
        "heap_size": get("generic.heap_size"), "cpu_free": get("tcmalloc.cpu_free"),
        "pageheap_free_bytes": get("tcmalloc.pageheap_free_bytes"),
        // whether its per-CPU caches (rseq) are in use, by its own account
        "per_cpu_caches_active": get("tcmalloc.per_cpu_caches_active").map(|v| v != 0),
    })
}

fn mimalloc(info: MiProcessInfo) -> Value {
    let mut v = [0usize; 8];
    let [a, b, c, d, e, f, g, h] = &mut v;
    // SAFETY: mi_process_info writes each non-null argument.
    unsafe { info(a, b, c, d, e, f, g, h) };
    json!({
        "allocator": "mimalloc", "source": "mi_process_info",
        "live_bytes": null, "resident_bytes": v[5],
        "current_commit": v[5], "peak_commit": v[6],
        "note": "mimalloc 2.0 keeps no count of live bytes outside its debug statistics",
    })
}

fn glibc() -> Value {
    // SAFETY: mallinfo2 (glibc 2.33 and later) only reads malloc's own counters.
    let m = unsafe { libc::mallinfo2() };
    let live = (m.uordblks + m.hblkhd) as u64;
    json!({
        "allocator": "glibc", "source": "mallinfo2",
        "live_bytes": live, "resident_bytes": (m.arena + m.hblkhd) as u64,
        "arena": m.arena as u64, "in_use": m.uordblks as u64, "free": m.fordblks as u64,
        "mmapped": m.hblkhd as u64, "releasable": m.keepcost as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test binary's allocator is glibc: its account sees a live allocation. The account is
    /// the process's, and the other tests run in threads beside this one: what they free between
    /// the two reads lowers the second (448048 -> 8588400 for 8 MiB once), so a few tries are
    /// allowed and one must see all of it.
    #[test]
    fn glibc_counts_a_live_allocation() {
        let mut seen = Vec::new();
        for _ in 0..5 {
            let before = read()["live_bytes"].as_u64().unwrap();
            let v: Vec<u8> = std::hint::black_box(vec![1; 8 << 20]);
            let during = read()["live_bytes"].as_u64().unwrap();
            drop(std::hint::black_box(v));
            if during >= before + (8 << 20) {
                return;
            }
            seen.push(format!("{before} -> {during}"));
        }
        panic!(
            "an 8 MiB allocation never showed in the account: {}",
            seen.join(", ")
        );
    }
}
