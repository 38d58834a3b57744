//! `tuneline doctor`: a gang's public rendezvous address is warned of, with
//! what to do; a private one passes; a broken config fails the check with
//! the line and field at fault. The GPU line is this machine's own.

use crate::common::{cli_snapshot, TestContext};

/// `tuneline doctor` with `MASTER_ADDR` set to `addr`.
fn doctor(ctx: &TestContext, addr: &str) -> (i32, String, String) {
    crate::common::output({
        let mut cmd = ctx.cmd(&["doctor"]);
        cmd.env("MASTER_ADDR", addr);
        cmd
    })
}

#[test]
fn a_public_rendezvous_address_is_warned_of_and_a_private_one_passes() {
    let ctx = TestContext::new();
    let gpus = (r"(?m)^(ok|note): gpus: .*$", "[this machine's GPUs]");
    cli_snapshot!(ctx, doctor(&ctx, "203.0.113.7"), [gpus.0 => gpus.1], @"
    success: true
    exit_code: 0
    ----- stdout -----
    ok: config: no tuneline.toml: the defaults apply
    [this machine's GPUs]
    warning: rendezvous: MASTER_ADDR 203.0.113.7 is a public address (203.0.113.7): the gang's rendezvous (torch's TCP store) has no authentication, so anyone who reaches its port there can join or poison the gang; put the gang's machines on a private network (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16) and give each worker its address there (`tuneline worker --address`)

    ----- stderr -----
    ");
    ctx.write("tuneline.toml", "[lora]\nlora_r = 0\n");
    cli_snapshot!(ctx, doctor(&ctx, "10.0.0.3"), [gpus.0 => gpus.1], @"
    success: false
    exit_code: 3
    ----- stdout -----
    error: config: tuneline.toml:2: lora.lora_r: 0 is out of range; allowed: 1..=4096
    [this machine's GPUs]
    ok: rendezvous: MASTER_ADDR 10.0.0.3 is not a public address; torch's store there has no authentication, so keep the gang's network private

    ----- stderr -----
    error: doctor found an error (above)
    ");
}
