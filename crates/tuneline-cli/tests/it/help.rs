//! `--help` of the binary and of every command, as a user reads it: the top
//! level lists only working commands and documents the exit codes.

use crate::common::{cli_snapshot, TestContext};

/// A test of its own that holds `tuneline WORDS --help` to the inline
/// snapshot beside it, so one command's change never hides another's.
macro_rules! help {
    ($test:ident, [$($word:literal),+], @$snapshot:literal) => {
        #[test]
        fn $test() {
            let ctx = TestContext::new();
            cli_snapshot!(ctx, ctx.run(&[$($word),+, "--help"]), @$snapshot);
        }
    };
}

#[test]
fn top_level_help_lists_commands_and_exit_codes() {
    let ctx = TestContext::new();
    cli_snapshot!(ctx, ctx.run(&["--help"]), @"
    success: true
    exit_code: 0
    ----- stdout -----
    tuneline: low-cost LLM fine-tuning. Data on CPU, gradients on rented GPUs, every artifact versioned
    in object storage

    Usage: tuneline [OPTIONS] <COMMAND>

    Commands:
      init      Write a commented tuneline.toml (every section, Hugging Face / PEFT names) and an
                example dataset
      config    Check a config file
      store     Committed artifacts in the store: list, push, pull, verify, clean up
      data      The data plane: raw chat data in, a versioned, tokenized, packed dataset out
      train     Train a LoRA adapter here, in this process, on the newest version of [data] name;
                checkpoints go to the store
      plan      What to rent for this job: memory fit, offers ranked by expected ETH, spot vs on-demand,
                checkpoint interval
      simulate  Replay spot preemptions (a Poisson rate or real traces) against checkpoint strategies
      run       The main job: prepare data, train on local workers through an embedded control plane,
                evaluate, report the cost
      server    The control plane: HTTP API (OpenAPI at /openapi.json), job queue, autoscaler, ledger
      worker    A stateless worker: takes jobs from a server, prefetches, trains, checkpoints, survives
                preemption
      cost      What runs cost, from the ledger
      model     Base models in the store, for workers that share nothing else with this machine
      jobs      Jobs on a server: list, submit an external trainer command, cancel, read logs
      eval      Base against tuned on the eval split: loss, perplexity, exact match, ROUGE-L, BLEU, a
                spot-check sheet
      merge     Fold a run's adapter into the weights it trained on: a Hugging Face safetensors
                directory
      export    A GGUF for llama.cpp and Ollama, with a Modelfile beside it, or the adapter alone as a
                LoRA GGUF
      deliver   Deliver a run: eval against the base, merge, a q8_0 GGUF with its Modelfile
                (smoke-tested), pushed to the store
      push      Deliver a directory of exports: to the store as models/<name>/<version>/ with a model
                card, to an OCI registry as an Ollama model, or to the Hugging Face Hub
      engines   The training engines' environments: make a Python engine's pinned environment ahead of
                the first job
      doctor    Check this machine as a worker or a gang's member: the config, the GPUs, a public
                rendezvous address
      help      Print this message or the help of the given subcommand(s)

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help
      -V, --version        Print version

    Exit codes:
      0  success
      1  the operation failed (store unreachable, access denied, transfer failed)
      2  bad usage or bad input (config file, store URL, path); the message names it
      3  verification found corrupt or missing files
      4  preempted: training stopped on SIGTERM after committing a checkpoint; run it again to resume

    ----- stderr -----
    ");
}

// Every command a user can run, by its words.
help!(init_help, ["init"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Write a commented tuneline.toml (every section, Hugging Face / PEFT names) and an example dataset

    Usage: tuneline init [OPTIONS] [DIR]

    Arguments:
      [DIR]  Project directory (created if missing) [default: .]

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --force          Overwrite an existing tuneline.toml
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    ");
help!(config_check_help, ["config", "check"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Validate the config and print it resolved, secrets masked

    Usage: tuneline config check [OPTIONS]

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    ");
help!(config_reference_help, ["config", "reference"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Print the reference of every tuneline.toml key: type, default, example, meaning (docs/config.md)

    Usage: tuneline config reference [OPTIONS]

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    ");
help!(store_ls_help, ["store", "ls"], @r#"
    success: true
    exit_code: 0
    ----- stdout -----
    List committed artifacts (datasets, runs, checkpoints, models)

    Usage: tuneline store ls [OPTIONS] [PREFIX]

    Arguments:
      [PREFIX]  Only artifacts under this prefix [default: ""]

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    "#);
help!(store_push_help, ["store", "push"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Upload a directory and commit it (COMMIT.json last)

    Usage: tuneline store push [OPTIONS] <LOCAL_DIR> <PREFIX>

    Arguments:
      <LOCAL_DIR>  Local directory to upload
      <PREFIX>     Artifact prefix in the store, such as models/support-bot/v1

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    ");
help!(store_pull_help, ["store", "pull"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Download a committed artifact, verifying checksums and skipping files already in place

    Usage: tuneline store pull [OPTIONS] <PREFIX> <LOCAL_DIR>

    Arguments:
      <PREFIX>     Artifact prefix in the store
      <LOCAL_DIR>  Local directory to download into

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    ");
help!(store_verify_help, ["store", "verify"], @r#"
    success: true
    exit_code: 0
    ----- stdout -----
    Recheck every checksum of the committed artifacts under a prefix

    Usage: tuneline store verify [OPTIONS] [PREFIX]

    Arguments:
      [PREFIX]  Prefix to verify (every artifact under it) [default: ""]

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    "#);
help!(store_gc_help, ["store", "gc"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Remove uncommitted leftovers and checkpoints past training.save_total_limit

    Usage: tuneline store gc [OPTIONS]

    Options:
      -c, --config <FILE>            Config file [default: ./tuneline.toml, optional for store commands]
          --dry-run                  Only list what would be removed
          --older-than <OLDER_THAN>  Leave uncommitted objects younger than this alone (uploads in
                                     flight) [default: 1h]
          --store <URL>              Store URL, overriding [store] url: file://DIR, a path,
                                     s3://bucket/prefix or memory://
          --json                     Machine-readable JSON on stdout
      -v, --verbose...               More log output (-v, -vv)
      -q, --quiet                    Only errors
      -h, --help                     Print help

    ----- stderr -----
    ");
help!(data_prepare_help, ["data", "prepare"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Clean, dedup, split, tokenize and pack [data] inputs into datasets/<name>/<version>

    Usage: tuneline data prepare [OPTIONS] [INPUTS]...

    Arguments:
      [INPUTS]...  Input files, directories, globs or store:PREFIX (a committed artifact), instead of
                   data.inputs

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    ");
help!(data_show_help, ["data", "show"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Per-stage counts, token length percentiles and packing efficiency of a dataset

    Usage: tuneline data show [OPTIONS] <DATASET>

    Arguments:
      <DATASET>  NAME or NAME@VERSION (default: the newest version)

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    ");
help!(data_ls_help, ["data", "ls"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    List committed datasets

    Usage: tuneline data ls [OPTIONS]

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    ");
help!(train_help, ["train"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Train a LoRA adapter here, in this process, on the newest version of [data] name; checkpoints go to
    the store

    Usage: tuneline train [OPTIONS]

    Options:
      -c, --config <FILE>     Config file [default: ./tuneline.toml, optional for store commands]
          --run <NAME>        Run id (default: the project name and a hash of the config and dataset, so
                              a rerun resumes)
          --dataset <PREFIX>  Train on this committed dataset version (datasets/NAME/VERSION) instead of
                              the newest of [data] name
          --store <URL>       Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix
                              or memory://
          --cache-dir <DIR>   Local cache for the dataset and checkpoints [default: .tuneline/cache]
          --json              Machine-readable JSON on stdout
          --max-steps <N>     Optimizer steps, instead of [training] max_steps
      -v, --verbose...        More log output (-v, -vv)
          --engine <ENGINE>   The engine, instead of [training] engine (a worker passes the one `auto`
                              resolved to on it)
      -q, --quiet             Only errors
      -h, --help              Print help

    ----- stderr -----
    ");
help!(server_help, ["server"], @r#"
    success: true
    exit_code: 0
    ----- stdout -----
    The control plane: HTTP API (OpenAPI at /openapi.json), job queue, autoscaler, ledger

    Usage: tuneline server [OPTIONS] [COMMAND]

    Commands:
      join-token  Print the join token that registers a worker with this server, and the command that
                  reads it
      help        Print this message or the help of the given subcommand(s)

    Options:
      -c, --config <FILE>    Config file [default: ./tuneline.toml, optional for store commands]
          --listen <ADDR>    Address to listen on, instead of [server] listen
          --state-dir <DIR>  State directory: the state database, the token file, local workers' logs
                             [default: .tuneline/control]
          --store <URL>      Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix
                             or memory://
          --insecure-http    Serve plain HTTP past loopback ([server] tls = "off"), sending tokens in
                             clear
          --json             Machine-readable JSON on stdout
      -v, --verbose...       More log output (-v, -vv)
      -q, --quiet            Only errors
      -h, --help             Print help

    ----- stderr -----
    "#);
help!(worker_help, ["worker"], @r#"
    success: true
    exit_code: 0
    ----- stdout -----
    A stateless worker: takes jobs from a server, prefetches, trains, checkpoints, survives preemption

    Usage: tuneline worker [OPTIONS] --server <URL>

    Options:
      -c, --config <FILE>              Config file [default: ./tuneline.toml, optional for store
                                       commands]
          --server <URL>               The server's URL [env: TUNELINE_SERVER=]
          --join <FILE>                A file holding the join token `tuneline server join-token`
                                       prints, `-` for stdin: it registers the worker and pins the
                                       server's certificate [the token itself: env TUNELINE_JOIN]
          --store <URL>                Store URL, overriding [store] url: file://DIR, a path,
                                       s3://bucket/prefix or memory://
          --json                       Machine-readable JSON on stdout
          --token <TOKEN>              The server's admin token instead of a join token [default:
                                       .tuneline/control/token] [env: TUNELINE_TOKEN]
          --fingerprint <SHA256>       The server certificate's sha256:HEX fingerprint to pin [default:
                                       the join token's, or the certificate in .tuneline/control, else
                                       the system's CAs] [env: TUNELINE_SERVER_FINGERPRINT=]
      -v, --verbose...                 More log output (-v, -vv)
          --insecure-http              Allow plain http:// past loopback, which sends tokens in clear
                                       [env: TUNELINE_INSECURE_HTTP=]
      -q, --quiet                      Only errors
          --cache-dir <DIR>            Local cache for datasets and checkpoints (the node's NVMe)
                                       [default: .tuneline/worker-cache]
          --cache-size <SIZE>          Most the cache keeps of datasets and base models, least recently
                                       used evicted ("50GiB") [default: [workers] cache_size, else the
                                       disk] [env: TUNELINE_CACHE_SIZE=]
          --provider <NAME>            The provider that launched this machine; its [providers.NAME]
                                       gives price and type [env: TUNELINE_PROVIDER=] [default: manual]
          --instance <ID>              The provider's instance id [env: TUNELINE_INSTANCE=]
          --instance-type <TYPE>       The instance type
          --price <USD>                Dollars per hour this machine costs [env:
                                       TUNELINE_PRICE_PER_HOUR=]
          --spot                       A spot (preemptible) machine
          --price-as-of <WHEN>         When --price was current, for a catalog's or a price history's
                                       price (the ledger keeps it)
          --spot-notice <SOURCE>       Watch this metadata service for a spot notice (aws: IMDSv2; gcp)
                                       and stop as on SIGTERM [env: TUNELINE_SPOT_NOTICE=] [possible
                                       values: aws, gcp]
          --orphan-timeout <DURATION>  Stop, checkpointing any job, when the server has not answered for
                                       this long ("30m") [env: TUNELINE_ORPHAN_TIMEOUT=]
          --self-stop <CLOUD>          On exit (shut down by the server, orphaned, or failed), terminate
                                       this machine's instance through its cloud's API (aws, runpod,
                                       vast) [env: TUNELINE_SELF_STOP=] [possible values: aws, runpod,
                                       vast]
          --class <CLASS>              The jobs it takes: gpu (training) or cpu (delivery) [env:
                                       TUNELINE_WORKER_CLASS=] [default: gpu] [possible values: gpu,
                                       cpu]
          --address <IP>               The address the other machines of a gang reach this one at
                                       [default: the one it reaches the server from] [env:
                                       TUNELINE_WORKER_ADDRESS=]
      -h, --help                       Print help

    ----- stderr -----
    "#);
help!(run_help, ["run"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    The main job: prepare data, train on local workers through an embedded control plane, evaluate,
    report the cost

    Usage: tuneline run [OPTIONS]

    Options:
      -c, --config <FILE>     Config file [default: ./tuneline.toml, optional for store commands]
          --state-dir <DIR>   The control plane's state directory
          --max-attempts <N>  Attempts the training job gets (preemptions and infrastructure errors use
                              them up) [default: 20]
          --store <URL>       Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix
                              or memory://
          --json              Machine-readable JSON on stdout
      -v, --verbose...        More log output (-v, -vv)
      -q, --quiet             Only errors
      -h, --help              Print help

    ----- stderr -----
    ");
help!(jobs_ls_help, ["jobs", "ls"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    List jobs

    Usage: tuneline jobs ls [OPTIONS]

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    ");
help!(jobs_submit_help, ["jobs", "submit"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Queue the config's training job (--train), or an external trainer command (such as
    examples/peft/train_lora.py) that workers run with TUNELINE_* variables

    Usage: tuneline jobs submit [OPTIONS] [-- <ARGV>...]

    Arguments:
      [ARGV]...  The trainer command

    Options:
      -c, --config <FILE>     Config file [default: ./tuneline.toml, optional for store commands]
          --train             Queue the training job the config describes: its base model and dataset
                              committed to the store first (as `tuneline run` does)
          --run <NAME>        The run's name: its checkpoints go to runs/NAME/checkpoints in the store
          --json              Machine-readable JSON on stdout
          --store <URL>       The store its checkpoints are committed to (s3://bucket/prefix or a
                              directory)
          --dataset <PREFIX>  A committed dataset version prefetched into TUNELINE_DATA_DIR
      -v, --verbose...        More log output (-v, -vv)
          --nodes <M>         Machines that run the command together, as one gang, each with torchrun's
                              variables (MASTER_ADDR, NODE_RANK, NNODES, ...) [default: 1]
      -q, --quiet             Only errors
          --gpus <N>          Processes each machine of the gang runs (its NPROC_PER_NODE): GPUs it must
                              have [default: one per GPU]
          --max-attempts <N>  Attempts before the job fails [default: 5]
          --wait              Wait for the job to end, and exit with its status: 0 when it succeeded, 1
                              when it failed or was cancelled
      -h, --help              Print help

    ----- stderr -----
    ");
help!(jobs_cancel_help, ["jobs", "cancel"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Cancel a job; a running one's worker stops it

    Usage: tuneline jobs cancel [OPTIONS] <ID>

    Arguments:
      <ID>  The job's id

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    ");
help!(jobs_logs_help, ["jobs", "logs"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    A job's log and metric lines: the newest page, control characters shown escaped

    Usage: tuneline jobs logs [OPTIONS] <ID>

    Arguments:
      <ID>  The job's id

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
      -f, --follow         Keep printing new lines, from where the printed ones end, until the job ends
          --head           The first page instead of the newest
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --all            Every line from the first, page after page
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    ");
help!(cost_report_help, ["cost", "report"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    ETH = (price x wall + storage + egress) / (effective hours x utilization), with every component

    Usage: tuneline cost report [OPTIONS] [RUN]

    Arguments:
      [RUN]  A job id or run name [default: the newest job]

    Options:
      -c, --config <FILE>    Config file [default: ./tuneline.toml, optional for store commands]
          --state-dir <DIR>  The control plane's state directory [default: .tuneline/control]
          --store <URL>      Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix
                             or memory://
          --json             Machine-readable JSON on stdout
      -v, --verbose...       More log output (-v, -vv)
      -q, --quiet            Only errors
      -h, --help             Print help

    ----- stderr -----
    ");
help!(model_add_help, ["model", "add"], @r#"
    success: true
    exit_code: 0
    ----- stdout -----
    Commit a GGUF file or a Hugging Face directory to models/base/<name>/<sha256>/; prints the `[model]
    path = "store:..."` that names it

    Usage: tuneline model add [OPTIONS] <PATH|hf://ORG/NAME>

    Arguments:
      <PATH|hf://ORG/NAME>  The GGUF file or Hugging Face directory, or
                            hf://ORG/NAME[/FILE.gguf][@REVISION] to download from the Hugging Face Hub
                            once (HF_TOKEN for gated models, HF_ENDPOINT for a mirror)

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --name <NAME>    Its name in the store [default: the file's stem, the directory's name, or the
                           repository's NAME]
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    "#);
help!(plan_help, ["plan"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    What to rent for this job: memory fit, offers ranked by expected ETH, spot vs on-demand, checkpoint
    interval

    Usage: tuneline plan [OPTIONS]

    Options:
      -c, --config <FILE>              Config file [default: ./tuneline.toml, optional for store
                                       commands]
          --model <NAME|PATH>          A model by name (qwen2.5-7b, llama-3.1-8b, ...) or a path,
                                       instead of [model] path
          --quant <BITS>               Base weight bits: 4 (QLoRA), 8 or 16 (LoRA) [default: 4 with
                                       [model] quantized_base, else 16]
          --store <URL>                Store URL, overriding [store] url: file://DIR, a path,
                                       s3://bucket/prefix or memory://
          --json                       Machine-readable JSON on stdout
          --max-seq-length <N>         Tokens per sequence, instead of [data] max_seq_length
          --batch <N>                  Sequences per micro-batch, instead of [training]
                                       per_device_train_batch_size
      -v, --verbose...                 More log output (-v, -vv)
      -q, --quiet                      Only errors
          --steps <N>                  Optimizer steps, instead of [training] max_steps
          --gpu <NAME>                 Only offers with this GPU
          --gpus <N|all>               Also rank a gang of N GPUs per machine (or all of each offer's),
                                       instead of [training] gpus, against one GPU
          --nodes <M>                  Also rank a gang of M machines, instead of [training] nodes,
                                       against one GPU
          --phase <PHASE>              Job phase, instead of [workers] phase: experiment (spot ok),
                                       validation (on-demand), delivery (CPU)
          --no-gradient-checkpointing  Plan without gradient checkpointing (more memory, about a quarter
                                       faster)
          --optim <NAME>               Optimizer, by its TrainingArguments name: adamw_torch,
                                       adamw_bnb_8bit or sgd [default: adamw_torch]
          --top <TOP>                  Offers shown [default: 12]
          --refresh                    First read current prices from each configured cloud's API
                                       ([providers.aws|runpod|vast|lambda]) into
                                       .tuneline/prices/<date>.toml
      -h, --help                       Print help

    ----- stderr -----

    ");
help!(simulate_help, ["simulate"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Replay spot preemptions (a Poisson rate or real traces) against checkpoint strategies

    Usage: tuneline simulate [OPTIONS] <--trace <PATH>|--mtbf <DURATION>>

    Options:
      -c, --config <FILE>               Config file [default: ./tuneline.toml, optional for store
                                        commands]
          --trace <PATH>                A spot trace file, or a directory of them (data/spot-traces/...)
          --mtbf <DURATION>             Mean time between preemptions, for Poisson preemptions
          --store <URL>                 Store URL, overriding [store] url: file://DIR, a path,
                                        s3://bucket/prefix or memory://
          --json                        Machine-readable JSON on stdout
          --work <DURATION>             Training work the run needs [default: 24h]
          --price <USD>                 Spot $/h [default: 1]
      -v, --verbose...                  More log output (-v, -vv)
          --on-demand-price <USD>       On-demand $/h: adds a row without preemptions, and where
                                        checkpoint-less spot stops paying off
      -q, --quiet                       Only errors
          --checkpoint-time <DURATION>  Time one checkpoint takes to write and commit (C) [default: 1m]
          --restart-time <DURATION>     Time to restart after a preemption: provisioning, downloads,
                                        loading (R) [default: 5m]
          --every <DURATION>            Work between checkpoints for the local-disk and store strategies
                                        [default: 30m]
          --deadline <DURATION>         Give a run up after this much wall time [default: 10 x work]
          --utilization <UTILIZATION>   Share of wall time spent on gradients, for ETH [default: 1]
          --runs <RUNS>                 Runs replayed per strategy, each with its own seed [default:
                                        1000]
          --seed <SEED>                 First seed [default: 0]
      -h, --help                        Print help

    ----- stderr -----
    ");
help!(eval_help, ["eval"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Base against tuned on the eval split: loss, perplexity, exact match, ROUGE-L, BLEU, a spot-check
    sheet

    Usage: tuneline eval [OPTIONS] [RUN]

    Arguments:
      [RUN]  The run [default: the run of this config on the newest dataset version]

    Options:
      -c, --config <FILE>      Config file [default: ./tuneline.toml, optional for store commands]
          --checkpoint <STEP>  The checkpoint's step [default: the latest committed]
          --store <URL>        Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix
                               or memory://
          --json               Machine-readable JSON on stdout
      -v, --verbose...         More log output (-v, -vv)
      -q, --quiet              Only errors
      -h, --help               Print help

    ----- stderr -----
    ");
help!(merge_help, ["merge"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Fold a run's adapter into the weights it trained on: a Hugging Face safetensors directory

    Usage: tuneline merge [OPTIONS] --out <DIR> [RUN]

    Arguments:
      [RUN]  The run [default: the run of this config on the newest dataset version]

    Options:
      -c, --config <FILE>      Config file [default: ./tuneline.toml, optional for store commands]
          --checkpoint <STEP>  The checkpoint's step [default: the latest committed]
          --dtype <DTYPE>      The weights' dtype: f32 (exact), bf16 or f16 [default: f32]
          --store <URL>        Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix
                               or memory://
          --json               Machine-readable JSON on stdout
          --out <DIR>          The new directory
      -v, --verbose...         More log output (-v, -vv)
      -q, --quiet              Only errors
      -h, --help               Print help

    ----- stderr -----
    ");
help!(export_help, ["export"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    A GGUF for llama.cpp and Ollama, with a Modelfile beside it, or the adapter alone as a LoRA GGUF

    Usage: tuneline export [OPTIONS] --out <FILE|DIR> [RUN]

    Arguments:
      [RUN]  The run [default: the run of this config on the newest dataset version]

    Options:
      -c, --config <FILE>           Config file [default: ./tuneline.toml, optional for store commands]
          --checkpoint <STEP>       The checkpoint's step [default: the latest committed]
          --model <DIR>             Export this merged (or any Hugging Face or GGUF) model instead of a
                                    run
          --store <URL>             Store URL, overriding [store] url: file://DIR, a path,
                                    s3://bucket/prefix or memory://
          --format <FORMAT>         The file format [default: gguf] [possible values: gguf]
          --json                    Machine-readable JSON on stdout
          --quant <TYPE[,TYPE...]>  Tensor types: f32, f16, bf16, q8_0, q4_0, q4_1, q4_k_m (llama.cpp's
                                    mix), q5_k_m, q6_k; several, comma-separated, share one merge
                                    [default: q8_0]
      -v, --verbose...              More log output (-v, -vv)
          --adapter                 Write the LoRA adapter alone, as llama.cpp's adapter GGUF
                                    (`llama-cli --lora`)
      -q, --quiet                   Only errors
          --out <FILE|DIR>          The GGUF file to write (a Modelfile is written beside a model); with
                                    several types, the directory for NAME.TYPE.gguf files
          --no-smoke                Skip the smoke test (the file read back, eval prompts answered, its
                                    eval loss against the merge's)
      -h, --help                    Print help

    ----- stderr -----
    ");
help!(deliver_help, ["deliver"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Deliver a run: eval against the base, merge, a q8_0 GGUF with its Modelfile (smoke-tested), pushed
    to the store

    Usage: tuneline deliver [OPTIONS] [RUN]

    Arguments:
      [RUN]  The run [default: the run of this config on the newest dataset version]

    Options:
      -c, --config <FILE>         Config file [default: ./tuneline.toml, optional for store commands]
          --checkpoint <STEP>     The checkpoint's step [default: the latest committed]
          --out <DIR>             Where the GGUF and Modelfile are written before the push [default:
                                  out/<run>]
          --store <URL>           Store URL, overriding [store] url: file://DIR, a path,
                                  s3://bucket/prefix or memory://
          --cache-dir <DIR>       Where the checkpoint, the eval split and the staged model are pulled
                                  [default: .tuneline/cache]
          --json                  Machine-readable JSON on stdout
          --server <URL>          The control plane whose ledger bills the run, for the model card (a
                                  worker's server) [env: TUNELINE_SERVER=]
      -v, --verbose...            More log output (-v, -vv)
      -q, --quiet                 Only errors
          --token <TOKEN>         That server's bearer token [env: TUNELINE_TOKEN]
          --fingerprint <SHA256>  The server certificate's sha256:HEX fingerprint to pin [default: the
                                  join token's, or the certificate in .tuneline/control, else the
                                  system's CAs] [env: TUNELINE_SERVER_FINGERPRINT=]
          --insecure-http         Allow plain http:// past loopback, which sends tokens in clear [env:
                                  TUNELINE_INSECURE_HTTP=]
          --state-dir <DIR>       Without --server: the state directory whose ledger bills the run
                                  [default: .tuneline/control]
      -h, --help                  Print help

    ----- stderr -----
    ");
help!(push_help, ["push"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Deliver a directory of exports: to the store as models/<name>/<version>/ with a model card, to an
    OCI registry as an Ollama model, or to the Hugging Face Hub

    Usage: tuneline push [OPTIONS] --dir <DIR> [TARGET]

    Arguments:
      [TARGET]  Where to: the store [default]; oci://HOST[:PORT]/NAMESPACE/NAME[:TAG], an Ollama model
                (credentials from TUNELINE_REGISTRY_USER and TUNELINE_REGISTRY_PASSWORD); or
                hf://USER/REPO[@BRANCH], a Hugging Face Hub repository (token from HF_TOKEN)

    Options:
      -c, --config <FILE>      Config file [default: ./tuneline.toml, optional for store commands]
          --insecure           Talk to the registry over plain HTTP, as `ollama pull --insecure` does
          --dir <DIR>          The delivery directory: what `tuneline export` and `tuneline merge` wrote
          --store <URL>        Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix
                               or memory://
          --json               Machine-readable JSON on stdout
          --run <RUN>          The run the files came from [default: the run of this config on the
                               newest dataset version]
          --checkpoint <STEP>  The checkpoint's step [default: the latest committed]
      -v, --verbose...         More log output (-v, -vv)
      -q, --quiet              Only errors
          --state-dir <DIR>    The control plane's state directory, for the run's bill [default:
                               .tuneline/control]
      -h, --help               Print help

    ----- stderr -----
    ");
help!(doctor_help, ["doctor"], @"
    success: true
    exit_code: 0
    ----- stdout -----
    Check this machine as a worker or a gang's member: the config, the GPUs, a public rendezvous address

    Usage: tuneline doctor [OPTIONS]

    Options:
      -c, --config <FILE>  Config file [default: ./tuneline.toml, optional for store commands]
          --store <URL>    Store URL, overriding [store] url: file://DIR, a path, s3://bucket/prefix or
                           memory://
          --json           Machine-readable JSON on stdout
      -v, --verbose...     More log output (-v, -vv)
      -q, --quiet          Only errors
      -h, --help           Print help

    ----- stderr -----
    ");
