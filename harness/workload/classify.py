"""Map an exception to a coarse error class the report can group by.

Classes: driver, nccl, cuda, oom, shm, import, launcher, timeout, other. Order matters: the most
specific cause wins (an NCCL error whose text names /dev/shm is a shm problem; an NCCL "unhandled
cuda error" whose CUDA failure says the driver is older than the runtime is a driver problem; a
watchdog timeout reported by ProcessGroupNCCL is a timeout). The harness classifies launcher output
and re-reads old records with the same function: one classifier.
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

ERROR_CLASSES = ("driver", "nccl", "cuda", "oom", "shm", "import", "launcher", "timeout", "other")

# How a command that does not exist is said (issue 22: the container Slurm's nodes lacked the virtual
# environment the harness ran from, and the cell ended "launcher exit 127" without naming it); the
# harness names the command and where (outcome.missing_command). Each form as its tool prints it, seen
# here or in a public thread (tests/data/missing_commands.yaml): runc through the docker
# CLI (exit 127), crun through podman, slurmstepd's execve (srun then exits 2), env, dash and bash.
MISSING_COMMAND = [re.compile(p, re.MULTILINE) for p in (
    r'exec: \\?"(?P<cmd>[^"\\]+)\\?": (?:executable file not found in \$PATH|stat \S+: no such file or directory)',
    r"executable file `(?P<cmd>[^`]+)` not found",
    r"execve\(\): (?P<cmd>[^:\n]+): No such file or directory",
    "^(?:/usr/bin/)?env: ['\u2018](?P<cmd>[^'\u2019]+)['\u2019]: No such file or directory",  # curly in a UTF-8 locale
    r"^(?:\S*/)?(?:ba|da)?sh: (?:line \d+: |\d+: )?(?P<cmd>[^:\s]+): (?:command )?not found",
    r"^(?:\S*/)?(?:ba|da)?sh: (?:line \d+: |\d+: )?(?P<cmd>/[^:\s]+): No such file or directory",
)]

_IMPORT_TYPES = {"ImportError", "ModuleNotFoundError"}
_OOM_TYPES = {"OutOfMemoryError"}
_NCCL_TYPES = {"DistBackendError", "NcclError"}
_TIMEOUT_TYPES = {"TimeoutError"}
_CUDA_TYPES = {"CudaError", "AcceleratorError"}

# (class, regex) checked in this order against the message.
_RULES: List[Tuple[str, re.Pattern[str]]] = [
    # NVLink SHARP (NVLS) multicast: NCCL's own feature, even where its text names the fabric manager
    ("nccl", re.compile(r"\bNVLS\b|NVLink SHARP", re.I)),
    # The driver stack below CUDA: older than the runtime, kernel module and user library of different
    # versions, no driver at all, the fabric manager (NVSwitch systems) not running. These arrive
    # wrapped in NCCL's "unhandled cuda error" or torch's CUDA init errors; the wrapper is not the cause.
    ("driver", re.compile(r"driver version is insufficient|cudaErrorInsufficientDriver|"
                          r"CUDA_ERROR_INSUFFICIENT_DRIVER|NVIDIA driver on your system is too old|"
                          r"Driver/library version mismatch|Found no NVIDIA driver|Failed to initialize NVML|"
                          r"NVIDIA kernel module|nvidia-fabricmanager|fabric ?manager|"
                          r"system not yet initialized|cudaErrorSystemNotReady|"
                          # the same (802) by its number only: "CUDA Error 802", a runtime error (802)
                          r"\berror \(?802\b|runtime error \(802\)|"
                          r"CUDA_ERROR_SYSTEM_NOT_READY|forward compatibility was attempted|"
                          r"cudaErrorCompatNotSupportedOnDevice|"
                          # the NGC images' start-up check, and nvidia-container-cli's requirement check
                          r"built for NVIDIA Driver Release \S+ or later|compatibility mode is UNAVAILABLE|"
                          r"unsatisfied condition: cuda ?>=|"
                          # cudaErrorCallRequiresNewerDriver (36): a runtime newer than the driver calling
                          # what the driver lacks (NVIDIA/nccl#496)
                          r"API call is not supported in the installed CUDA driver|cudaErrorCallRequiresNewerDriver|"
                          # 803: the driver's libraries (or an image's compat libcuda) and the kernel module differ
                          r"cudaErrorSystemDriverMismatch|unsupported display driver / cuda driver combination|"
                          # the kernel module's own words for it (dmesg), and nvidia-smi's with no module
                          r"API mismatch: the client has the version|couldn.t communicate with the NVIDIA driver|"
                          # TensorFlow's and XLA's CUDA diagnostics for the same (kernel module against libcuda)
                          r"kernel version [\d.]+ does not match DSO version|"
                          # modprobe that cannot insert the driver's uvm module; NVML's library not found (the
                          # driver's user space absent, or not injected into the container)
                          r"could not (?:insert|find module by name=?) ?.nvidia\w{0,12}_uvm|could not load NVML library|"
                          # the same NVML failures in nvidia-ml-py's (pynvml's) words and go-nvml's code name
                          # (the Kubernetes device plugin's "Failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND")
                          r"NVMLError_(?:DriverNotLoaded|LibRmVersionMismatch|LibraryNotFound|NoPermission)\b|"
                          r"RM has detected an NVML/RM version mismatch|NVML Shared Library Not Found|"
                          r"(?:NVML_|\b)ERROR_LIBRARY_NOT_FOUND\b|"
                          # torch's CUDA initialisation failing with cudaErrorUnknown (a missing
                          # /dev/nvidia-uvm, pytorch/pytorch#49081: "CUDA unknown error - this may be due to an
                          # incorrectly set up environment"), and torch's extension builder finding no GPU
                          r"\bCUDA unknown error\b|No CUDA runtime is found|"
                          # the toolkit's stub libcuda (for linking only) loaded instead of the driver's; NCCL's
                          # own WARN of it stays NCCL's (its static build's shims say it too: horovod#3831)
                          r"(?<!failure ')CUDA driver is a stub|cudaErrorStubLibrary|/stubs/libcuda\.so|"
                          # the driver API's own initialisation, the UVM module, nvidia-docker 1's version check
                          r"failed call to cuInit|cuda driver library init failure|Could not load UVM kernel module|"
                          r"unsupported CUDA version: driver [\d.]+ < image|"
                          # the driver's own library absent where a CUDA program runs (a container started
                          # without the GPU: nvidia-docker#753), the driver's module not loaded (enroot's hook)
                          r"libcuda\.so[.\d]*: cannot open shared object|shared object file libcuda\.so|"
                          r"Kernel module nvidia\w* is not loaded|"
                          # PTX written by a newer toolkit than the driver's JIT compiles (cudaErrorUnsupportedPtxVersion,
                          # 222): the driver older than the code, as "insufficient" above; DKMS unable to build a
                          # kernel module (the NVIDIA driver's) for the running kernel
                          r"PTX was compiled with an unsupported toolchain|cudaErrorUnsupportedPtxVersion|"
                          r"CUDA_ERROR_UNSUPPORTED_PTX_VERSION|Bad return status for module build on kernel|"
                          # the driver's GSP firmware (GPU System Processor) not answering the driver's RPCs
                          # (Xid 119): the driver's own timeout, not a collective's
                          r"waiting for RPC (?:response )?from (?:GPU\d* )?GSP|"
                          # the kernel module's version check in a paste cut before its first line, X's and GL's
                          # words for it; the kernel module unable to bring a GPU up (RmInitAdapter), the open
                          # module refusing one (a GeForce on its first releases, a GPU without GSP)
                          r"this kernel module has the version [\d.]+|"
                          r"API mismatch: (?:the NVIDIA kernel module|this NVIDIA driver component) has|"
                          r"RmInitAdapter failed|rm_init_adapter failed|Open nvidia\.ko is only ready|"
                          # (the kernel wraps it, "NVRM: " and a dmesg time at each line's start)
                          r"not supported by open\s{1,40}(?:\[[\d. ]{1,20}\]\s{0,4})?(?:NVRM:\s{1,8})?nvidia\.ko|"
                          # nvidia-smi without NVML's library (the driver's user space absent, or not injected into
                          # the container); the GPU Operator's driver container unable to unload modules in use
                          r"couldn.t find libnvidia-ml\.so|Could not unload NVIDIA driver kernel modules|"
                          # the NGC images' entrypoint finding no driver in the container
                          r"The NVIDIA Driver was not detected\.\s{1,4}GPU functionality will not be available|"
                          # loaders that dlopen the driver's libcuda and find none (cuda-python, Rust's cudarc)
                          r"Failed to dlopen libcuda\.so|Unable to find cuda lib under the names|"
                          # TensorFlow's diagnostics finding no driver libcuda loaded (the driver's CUDA library
                          # not installed: tensorflow#4267)
                          r"unable to find libcuda\.so DSO loaded into this program|"
                          r"Unable to dynamically load the \W{0,2}cuda\W{0,2} shared library|"
                          # Singularity/Apptainer's --nv finding no driver library or binary on the host
                          r"Could not find any (?:NVIDIA|nv) (?:libraries|binaries) on this host", re.I)),
    # The container runtime could not give the container its GPUs: Docker has no NVIDIA device driver
    # ("could not select device driver"), the NVIDIA hook failed (nvidia-container-cli, whose "load
    # library failed: libnvidia-ml.so.1: cannot open shared object file" is not a Python import), an
    # unknown runtime or unresolvable CDI device. No rank started, so it is the launcher's failure; an
    # NVML version mismatch inside the hook stays a driver problem (the rule above comes first).
    ("launcher", re.compile(r"could not select device driver|nvidia-container-cli|"
                            # the engine unable to start the runtime registered as nvidia (its package removed);
                            # a deployment's check that docker's default runtime is not nvidia
                            r"nvidia-container-runtime\S{0,20}: (?:no such file|executable file not found)|"
                            r"default runtime is not set correctly|"
                            # the hook's query of the container's device cgroup filters (cgroup v2), also
                            # where the line lost the hook's name
                            r"bpf_prog_query\(BPF_CGROUP_DEVICE\)|"
                            r"unknown or invalid runtime name|Unknown runtime specified|unresolvable CDI devices|"
                            # containerd's CRI without the runtime class's runtime (the toolkit not registered there)
                            r"no runtime for \"nvidia\" is configured|"
                            # a CDI spec naming device nodes the host no longer has (podman, docker 25+)
                            r"setting up CDI devices|failed to inject (?:CDI )?devices|"
                            # an engine without CDI taking the name for a path; a spec it cannot parse
                            r"stat nvidia\.com/gpu=|failed to (?:parse|unmarshal) CDI Spec|"
                            # a container whose saved device list names nodes the host lacks now (the uvm
                            # module not loaded after a reboot or a driver change), and the hook's driver
                            # service killed (GPUs held in exclusive-process mode), and that service's own
                            # "driver rpc error: ..." where the line lost the hook's name
                            r"error gathering device information while adding custom device|"
                            # Singularity/Apptainer unable to set the container up (a --nv bind's destination
                            # missing); a CDI spec's mount that podman/toolbox could not apply
                            r"FATAL:\s{1,8}container creation failed|failed to apply mount from Container Device Interface|"
                            # crun unable to find a file the container's spec mounts (a CDI spec's driver library
                            # that a driver upgrade replaced), and that library "not found" under podman
                            r"\bcrun: (?:cannot stat|error stat.ing file)\b|"
                            r"\blib(?:nvidia-[\w-]{1,40}|cuda|\w{1,12}_nvidia)\.so\.\d{1,6}\.\d{1,6}[\d.]{0,12}:? not found\b"
                            r".{0,60}\bpodman\b|"
                            r"terminating driver service \(forced\)|\bdriver rpc error: |"
                            # MPI's own programs unable to load MPI's libraries (before the import rule below)
                            r"\b(?:mpirun|mpiexec|orterun|prterun|orted|prted|orte-info)\S{0,40}: error while loading shared "
                            r"libraries", re.I)),
    # InfiniBand verbs failing (registering memory, creating queue pairs, completions the HCA never got
    # acknowledged) and libfabric/EFA (NCCL's aws-ofi-nccl plugin): NCCL's network transport, even where
    # the verbs say "Cannot allocate memory" (a memlock limit, not an OOM)
    ("nccl", re.compile(r"\bibv_\w+(?:\([^)\n]{0,40}\))? failed|NET/IB|NET/OFI|\bfi_getinfo\b|\blibfabric:\d+:|"
                        r"transport retry count(?:er)? exceeded|"
                        # libfabric's providers by their sources ("prov/rxr/src/rxr.h:1042"), UCX asking
                        # for the memlock limit it needs to register memory with the NIC
                        r"\bprov/\w+/src/|Please set max locked memory|Libfabric (?:EFA provider|error)", re.I)),
    # a library file that cannot be mapped (truncated: a bus error while loading it) is not /dev/shm
    ("import", re.compile(r"bus error when Loading nccl from library|invalid ELF header|: file too short", re.I)),
    ("oom", re.compile(r"out of memory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|"
                       r"Cannot allocate memory|"
                       # the host's OOM killer in other tools' words: Slurm's task/cgroup plugin "Detected %d
                       # oom-kill event(s) in step ..." / "in StepId=..." (its "out-of-memory handler"
                       # hyphenated), the kernel's "oom-kill:constraint=CONSTRAINT_..." summary (4.19+),
                       # Kubernetes' OOMKilled reason
                       r"\boom-kill event|\boom-kill:constraint=|\bOOMKilled\b|"
                       # vLLM: the GPU memory left for the KV cache holds fewer tokens than the model's length
                       r"maximum number of tokens that can be stored in KV cache|"
                       # the serving engines' start-up memory budgets: vLLM's KV cache with no block left,
                       # TGI's warmup of its largest batch, SGLang's static memory pool
                       r"No available memory for the cache blocks|"
                       r"Not enough memory to handle (?:\d+ (?:total tokens|prefill tokens)|`max_total_tokens=\d+`)|"
                       r"Not enough memory\. Please try to increase --mem-fraction-static|"
                       r"leave no GPU memory for the KV cache", re.I)),
    # a rank that fell back to /dev/shm reading its peer's cuMem handle as a segment with no name and size 0: NCCL's
    # own cuMem host memory, not /dev/shm
    ("nccl", re.compile(r"shared memory segment /dev/shm/nccl- \(size 0\)")),
    ("shm", re.compile(r"/dev/shm|No space left on device|Bus error|SIGBUS|shm_open|"
                       r"shared memory|"
                       # UCX's shared-memory (mm) transport unable to allocate its receive FIFO
                       r"mm_iface failed to allocate receive FIFO|"
                       # signal 7 (SIGBUS) as launchers report a child's death: "return code = -7", and
                       # DeepSpeed's "exits with return code = -7" as reporters shorten it
                       r"(?:return code|exit ?code|exit status|exits with return)\W{0,4}-7\b", re.I)),
    # a library that cannot be loaded, or two that do not fit (two NCCLs side by side)
    ("import", re.compile(r"ModuleNotFoundError|No module named|cannot open shared object file|"
                          r"undefined symbol|doesn't have NCCL built in|NCCL is not available|"
                          # a torch built without a backend (MPI: only from source) or without torch.distributed
                          # at all (Windows before 1.7, a source build without it)
                          r"doesn't have (?:MPI|UCC) built in|PyTorch built without distributed support|"
                          # torch's warning where the nccl backend is asked of a build without it
                          r"NCCL support is not compiled|"
                          # TensorFlow without NCCL kernels (Windows) for its Nccl* ops; MXNet built without
                          # the distributed kvstore; a library file that a package's loader did not find
                          r"No OpKernel was registered to support Op .Nccl\w{1,40}.|compile with USE_DIST_KVSTORE=1|"
                          r"\bFile \S{1,200}\.so not found\b|"
                          # vLLM's own search for a library (vllm/utils.py find_library: ldconfig, LD_LIBRARY_PATH)
                          r"Cannot find lib[\w.+-]{1,60}\.so[.\d]* in the system|"
                          # Triton linking its launcher against the driver library (-lcuda) and finding none
                          r"cannot find -lcuda\b|libcuda\.so cannot found|"
                          # NIXL's agent unable to load a backend's plugin library (libplugin_<NAME>.so)
                          r"getPluginParams: backend \W\w{1,40}\W not found|createBackend: unsupported backend\b|"
                          # a jaxlib without the CUDA platform (a CPU-only wheel): XLA finds no "cuda" platform
                          r"Could not find\s{1,4}registered platform with name: .{0,2}cuda\b|"
                          # cuDNN 8's loader unable to load one of its own sub-libraries (libcudnn_cnn_infer.so.8)
                          r"Could not load library libcudnn\w{0,40}\.so|"
                          # a CUDA/C++ extension (DeepSpeed's ops, torch's cpp_extension) that could not be built,
                          # so its library never loads: torch's "Error building extension", nvcc not knowing the
                          # GPU's arch, DeepSpeed's optimizer without its op ("no attribute 'ds_opt_adam'")
                          r"Error building extension '|Unsupported gpu archite(?:c|ch)ture|"
                          r"is not defined for option .gpu-architecture|has no attribute .ds_opt_\w+|"
                          # no ninja to build one (torch's verify_ninja_availability, DeepSpeed's jit_load), and
                          # setuptools' compiler step of the build ("command '/usr/bin/gcc' failed with exit code 1",
                          # distutils' "exit status 1")
                          r"Ninja is required to load C\+\+ extensions|due to ninja not being installed|"
                          r"'[^'\n]{0,200}\b(?:gcc|g\+\+|c\+\+|nvcc|clang\+{0,2})' failed with exit (?:code|status) \d|"
                          # CPython's ImportError of a from-import whose name the module lacks (a version skew)
                          r"cannot import name\b", re.I)),
    # a CUDA failure named inside NCCL's wrapper is the cause, not the wrapper
    ("cuda", re.compile(r"illegal memory access|unspecified launch failure|misaligned address|"
                        r"device-side assert|uncorrectable ECC|Xid|"
                        # the GPU itself: lost from the bus, kernels missing for its architecture, no
                        # bfloat16
                        r"fallen off the bus|GPU is lost|Unable to determine the device handle|"
                        r"no kernel image is available|not compatible with the current PyTorch installation|"
                        r"PyTorch no longer supports this GPU|"
                        # torch sees no GPU at all, said by ProcessGroupNCCL (the wrapper is not the cause)
                        r"ProcessGroupNCCL is only supported with GPUs|"
                        r"does not support bfloat16|Bfloat16 is only supported|"
                        # two GPUs without peer access, as torch's "Last error:" repeats the CUDA failure
                        # (NCCL's own WARN of it, cuMem host sharing in shm.cc, stays NCCL's)
                        r"(?<!WARN )Cuda failure 217 'peer access is not supported|"
                        # kernels for another architecture, CUDA's peer limit, CUDA after fork
                        r"invalid device function|peer mapping resources exhausted|TOO_MANY_PEERS|"
                        # TensorRT-LLM enabling peer access between two GPUs that have none (its custom all-reduce)
                        r"Can't enable access between nodes \d+ and \d+|"
                        r"Cannot re-initialize CUDA in forked subprocess|"
                        # the display's watchdog killing a long kernel, whatever "timed out" says
                        r"the launch timed out and was terminated|LAUNCH_TIMEOUT|cudaErrorLaunchTimeout|"
                        # an extension built with a CUDA toolkit other than torch's (DeepSpeed, cpp_extension)
                        r"does not match the version torch was compiled with|"
                        r"mismatches the version that was used to compile|"
                        # a libcuda without a symbol the runtime needs (an outdated WSL/Docker Desktop library)
                        r"Error 500\W{1,3}named symbol not found", re.I)),
    # an NCCL result code means NCCL itself failed, even when its text says "timed out"
    ("nccl", re.compile(r"\bnccl(?:Unhandled\w*|System|Internal|InvalidArgument|InvalidUsage|"
                        r"Remote)Error\b|NCCL error|"
                        # ncclUnhandledCudaError's own string, in a framework's wrapper that does not say NCCL
                        # (Paddle's "Nccl error, unhandled cuda error", its EnforceNotMet at nccl_helper.h)
                        r"(?i:\bunhandled cuda error\b)|"
                        # NCCL's own socket calls failing (misc/socket.cc): "Call to connect timeout : ..."
                        r"NCCL WARN (?:Call to \w+|Connect to \S+|socket\w*)|"
                        # NCCL 2.27+ names the peer: "socketFinalizeAccept from %s: wrong type" (2.30.7: "wrong
                        # socket type (peer %d != expected %d ...)")
                        r"socketFinalizeAccept(?: from \S+)?: wrong (?:socket )?type")),
    # a CPU tensor in a collective of an NCCL-only group, and DDP's parameter check that received nothing
    # from the other ranks (a network between them that does not carry NCCL's traffic)
    ("nccl", re.compile(r"Tensors must be CUDA and dense|No backend type associated with device type cpu|"
                        r"has inconsistent 0 params")),
    ("launcher", re.compile(r"address already in use|EADDRINUSE", re.I)),
    # a collective with no process group: the script was started without its launcher
    ("launcher", re.compile(r"Default process group (?:has not been|is not) initialized")),
    # Before any rank runs: Accelerate's own port check, and torch's rendezvous (c10d's TCPStore client,
    # torchrun's rendezvous) that cannot reach or resolve the master, even where its text says "timed out"
    ("launcher", re.compile(r"but another process is utilizing it|The client socket has (?:failed to connect|"
                            r"timed out after)|connect\(\) timed out\. Original timeout|"
                            r"connection to the C10d store has failed|Rendezvous\w*Error|"
                            r"cannot be retrieved \(gai error|host not found: (?:Name or service not known|"
                            r"Temporary failure in name resolution|No address associated)|"
                            # the launcher's own argument to the script, and MPI's start-up (ssh to each
                            # host, its daemons, its TCP transport between them)
                            r"unrecognized arguments: (?:--|\u2013|\u2014)local[-_]rank|Could not consume arg: --local[-_]rank|"
                            # the same in click's, absl's and transformers' HfArgumentParser's words
                            r"No such option: --local[-_]rank\b|Unknown command line flag .local[-_]rank.|"
                            r"not used by the HfArgumentParser: \[.--local[-_]rank(?:=\d+)?.\]|"
                            # a launcher not on PATH in fish's and Windows' words (bash's and sh's: MISSING_COMMAND)
                            r"\bfish: Unknown command:? .?(?:torchrun|accelerate|deepspeed|mpirun|srun)\b|"
                            r".(?:torchrun|accelerate|deepspeed|mpirun|mpiexec). is not recognized as (?:an internal or "
                            r"external command|(?:the|a) name of a cmdlet)|"
                            # c10d's store unable to listen (a port in use, or one below 1024 without root)
                            r"The server socket has failed to (?:listen|bind)|"
                            # MPI's start-up: ORTE without its executables, Open MPI without Slurm's PMI; Ray's
                            # worker that never registered with the head
                            r"A system-required executable either could not be found|OMPI (?:was )?not buil[dt] with SLURM.s PMI|"
                            # Open MPI 5 (PMIx only) started by srun with a PMI-1/2 plugin; Open MPI 4's PMIx client
                            # finding no server at MPI_Init (another launcher's mpiexec, a plain srun)
                            r"No PMIx server was reachable, but a PMI1/2 was detected|OPAL ERROR: Unreachable\b|"
                            # Open MPI's PMI client component failing at start-up (a PMI/PMIx build mix-up)
                            r"OPAL ERROR: Error in file \S{0,200}/mca/pmix/|"
                            # a Ray node or worker unable to reach the head's GCS (gcs_rpc_client.h)
                            r"Failed to connect to GCS at address|"
                            r"The current node timed out during startup|Failed to get node info|"
                            r"Could not resolve hostname|"
                            # ssh to another host failing (no route, no key, another port): exit 255 is ssh's own
                            r"\bssh: connect to host \S+ port \d+: |"
                            r"Command '\[?'?ssh [^\n]{1,200}returned non-zero exit status 255|"
                            # Horovod's own ssh check of each host; SkyPilot's Slurm executor that cannot find
                            # this node's address among the cluster's
                            r"ssh not successful for host \S+[:.]|IP address \S+ not found in cluster IPs|"
                            # Open MPI's daemons unable to reach each other over TCP
                            r"unable to complete a TCP connection\s+to another process|"
                            # a launcher's port taken; a launcher's variable missing (torch 0.4's THD)
                            r"port is already (?:in )?used?\b|is not set but it is required for env:// init|"
                            # a launcher's variable read where no launcher set it
                            r"KeyError: .(?:LOCAL_RANK|RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT).|"
                            r"(?:^|\n) {0,4}.(?:LOCAL_RANK|RANK|WORLD_SIZE|LOCAL_WORLD_SIZE).\n{1,3}During handling|"
                            # torch's store without libuv (Windows wheels); MPI's launchers of two kinds or
                            # releases; Ray unable to place vLLM's workers
                            r"use_libuv was requested|unknown option \"?--(?:hnp|tree-spawn|prtemca|pmixmca)|"
                            r"\[mpiexec@[^\]\n]{1,200}\] match_arg|No available node types can fulfill resource request|"
                            # vLLM's Ray executor finding no GPU worker on its own (the driver's) node
                            r"Ray does not allocate any \w{1,10} on the driver node|"
                            r"Current node has no GPU available\. current_node_resource=|"
                            # a process joining a Ray cluster of other Ray/Python versions (Ray's own check, and
                            # Ray Client's), not the "Python patch version mismatch" warning
                            r"(?:^|[\n:>\]])\s{0,4}Version mismatch: The cluster was started with|"
                            r"Python minor versions differ between client and server|"
                            r"Client Ray installation incompatible with server|"
                            # horovodrun not recognising the mpirun on PATH (its `mpirun --version` check)
                            r"not found in output of mpirun --version|does not find an installed (?:Open)?MPI\b|"
                            r"\b(?:orted|prted): (?:command )?not found|\bbtl: tcp: |ORTE was unable|"
                            r"(?:ORTE|PRTE) daemon has unexpectedly failed|"
                            # DeepSpeed's MPI discovery finding the script's own process group at odds with
                            # mpirun's ranks; Lightning's script-launched DDP refused in a notebook
                            r"MPI (?:world size|rank) \d+ does not match torch (?:world size|rank) \d+|"
                            r"is not compatible with an interactive environment|"
                            # DeepSpeed's runner: --include/--exclude naming a slot the hostfile lacks
                            r"No slot .?\d+.? specif\w{0,6} on host|"
                            r"\bbtl_tcp_endpoint\.c:|not enough slots available in the system|"
                            # Open MPI's mpirun (PRRTE's prterun) refusing to start as root
                            r"(?:mpirun|prterun|orterun|mpiexec) has detected an attempt to run as root|"
                            # Slurm refusing the job or its step before any task starts (GRES, CPUs, a step
                            # waiting for resources another step holds)
                            r"\b(?:srun|sbatch|salloc): error: (?:Unable to (?:create step|allocate resources)|"
                            r"Batch job submission failed|Invalid generic resource|Requested GRES option unsupported)|"
                            # an old Slurm's getopt not knowing a --gpus option
                            r"\b(?:srun|sbatch|salloc): (?:unrecognized|unknown) option\W{1,3}-?-gpus|"
                            # slurmctld refusing gres.conf's core binding; slurmd missing a gres.conf File= device
                            r"invalid GRES core specification|can.t stat gres\.conf file |"
                            # PMIx's own error lines (its shared-memory store, its server) at the ranks' start;
                            # sshd refusing a key for the home's or ~/.ssh's modes; Charliecloud's ch-run unable to
                            # set up its namespaces; the RDMA device plugin finding no RDMA device for its selector
                            r"\bPMIX ERROR: |Authentication refused: bad ownership or modes|\bch-run(?:\[\d+\])?: |"
                            r"missing RDMA device spec for device|"
                            # a registry refusing the image pull: enroot's URL error code, BuildKit's metadata request
                            r"\[ERROR\] URL https?://\S{1,300} returned error code: \d{3}|"
                            r"failed to resolve source metadata for \S{1,300}: unexpected status|"
                            # a site's submit filter refusing an option's old form (--gres=gpu:N for --gpus)
                            r"\bParameter --[\w-]{1,20}=\S{0,40} no longer acceptable|"
                            r"step creation (?:temporarily|still) disabled, retrying|"
                            # slurmd refusing gres.conf's records; the API server refusing a workload's service
                            # account (an operator's, an MPIJob launcher's); a Ray node unable to reach the head's Redis
                            r"gres\.conf duplicate records for |is forbidden: User \"system:serviceaccount:|"
                            r"Could not establish connection to redis|Failed to connect to Redis|"
                            # DeepSpeed's runner that counts no GPU; Lightning's device list naming a GPU the
                            # process cannot see; Accelerate's config file absent
                            r"no GPU resources available|You requested gpus?: \[[\d, ]*\]\s{1,8}But your machine only has|"
                            r"No such file or directory: \S{0,300}accelerate/default_config\.ya?ml|"
                            # Accelerate's config file with keys a newer accelerate wrote
                            r"The config file at .{0,300}? had unknown keys \(|"
                            # the store's client socket timing out: the rendezvous, not a collective
                            r"DistStoreError: Socket Timeout")),
    # gloo's transport failing to connect or to find its own address (a gloo failure is neither NCCL's
    # nor a timeout, whatever its text around it says: "timeout=timeout)" in a traceback)
    ("other", re.compile(r"(?i:Gloo connectFullMesh failed)|gloo/transport/tcp/pair\.cc:\d+\] connect \[|"
                         r"Unable to find address for:? |gloo::IoException|"
                         # gloo since March 2025 (torch 2.7+): "timed out connecting: SO_ERROR: Connection
                         # refused, remote=[...]", a refused connect, whatever "timed out" says
                         r"SO_ERROR: [A-Za-z ]{1,40}, remote=")),
    # a command that does not exist where it starts
    *(("launcher", pattern) for pattern in MISSING_COMMAND),
    # The container could not be started, whatever "timed out" says after: pyxis/enroot (Slurm's container
    # plugin) unable to import or start it, the engine's OCI runtime or a hook of it failing, the engine's own
    # daemon not starting (systemd's words, dockerd refusing its configuration), and the Kubernetes device
    # plugin unable to start (its NVML resource managers, its devices' walk)
    ("launcher", re.compile(r"\bpyxis: (?:failed to import docker image|container start failed|couldn.t start container)|"
                            r"\bspank_pyxis\.so: \w{1,40}\(\) failed|\benroot-mount: failed to mount\b|"
                            r"\bOCI runtime create failed\b|\bRunning hook #\d+:{1,2} error running\b|"
                            r"\bJob for (?:docker|containerd|crio)\.service failed\b|"
                            r"\bExecStart=\S{0,60}/(?:dockerd|containerd)\b[^\n]{0,300}\(code=exite|"
                            r"unable to configure the Docker daemon\b|"
                            r"\berror starting plugins?: |failed to construct NVML resource managers", re.I)),
    ("timeout", re.compile(r"timed out|timeout|timing out|deadline exceeded", re.I)),
    ("launcher", re.compile(r"accelerate`?\s+`?launch|launcher|rendezvous|"
                            r"environment variable (RANK|WORLD_SIZE|MASTER_ADDR|"
                            r"MASTER_PORT|LOCAL_RANK)", re.I)),
    # NCCL's own log lines, also those that do not say "NCCL" (its socket and bootstrap WARNs, and its
    # functions' names: "ncclSocketInit: connecting to address ...")
    ("nccl", re.compile(r"NCCL|\bRCCL\b|\bRccl error|NET/Socket|Bootstrap|Duplicate GPU detected|nvshmem|"
                        r"\bsocket(?:Start|Poll)Connect\b|"
                        r"\.(?:h|cc):\d+ WARN |\bnccl[A-Z]\w+|"
                        # an NCCL exception's type as a log prints it (CuPy's NcclError, wrapped by Ray's collective
                        # library as "RayTaskError(NcclError)"): the type NcclError that _NCCL_TYPES names
                        r"\bNcclError\b|"
                        # its bootstrap without an interface in NCCL_COMM_ID's subnet, its net plugin's index
                        r"No interface found in the same subnet|Could not find NET with id")),
    ("cuda", re.compile(r"CUDA error|CUDA driver|cuda runtime|cudaError|CUBLAS|CUDNN|"
                        r"no CUDA GPUs|invalid device ordinal|Unexpected error from cudaGetDeviceCount|"
                        r"device >= 0 && device < num_gpus|Found no NVIDIA driver|"
                        r"Torch not compiled with CUDA|\bCUDA failed with error code|"
                        # the driver API's virtual memory calls failing (cuMemCreate, cuMemMap: a fabric handle
                        # without an IMEX channel, a handle type the device refuses)
                        r"\bcuMem[A-Z]\w{1,30} failed|"
                        # JAX/XLA finding no CUDA device for its backend
                        r"no supported devices found for platform CUDA|"
                        # nccl-tests' CUDACHECK ("Test CUDA failure common.cu:%d '%s'")
                        r"\bTest CUDA failure\b|"
                        # the driver API's error codes by their names, such as CUDA_ERROR_NOT_INITIALIZED (jaxlib's
                        # device queries); those of other classes are caught above
                        r"\bCUDA_ERROR_[A-Z_]{3,40}\b|"
                        # two GPUs without peer access, outside NCCL (NCCL's own WARN is nccl, above)
                        r"peer access is not supported", re.I)),
]


def classify_text(
    type_name: str,
    message: str,
    type_names: Optional[List[str]] = None,
    backend: Optional[str] = None,
) -> str:
    """Error class from an exception's type name(s) (incl. bases) and message.

    ``backend`` matters only for a bare DistBackendError: it is an NCCL failure on nccl, but
    gloo raises it too, and a gloo failure is not an NCCL one.
    """
    names = set(type_names or []) | {type_name}
    if names & _IMPORT_TYPES:
        return "import"
    if names & _OOM_TYPES:
        return "oom"
    for cls, pattern in _RULES:
        if pattern.search(message or ""):
            return cls
    if names & _TIMEOUT_TYPES:
        return "timeout"
    if names & _NCCL_TYPES and backend != "gloo":
        return "nccl"
    if names & _CUDA_TYPES:
        return "cuda"
    return "other"


def _chain(exc: BaseException) -> List[BaseException]:
    """The exception and its causes/contexts (bounded), outermost first."""
    seen: List[BaseException] = []
    cur: Optional[BaseException] = exc
    while cur is not None and cur not in seen and len(seen) < 8:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def classify_exception(exc: BaseException, backend: Optional[str] = None) -> str:
    """Error class of an exception, looking through its cause chain."""
    chain = _chain(exc)
    names: List[str] = []
    for e in chain:
        names.extend(t.__name__ for t in type(e).__mro__)
    message = "\n".join(str(e) for e in chain)
    return classify_text(type(exc).__name__, message, names, backend)
