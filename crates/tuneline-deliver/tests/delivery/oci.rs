//! An Ollama model pushed to a real OCI registry (Debian's docker-registry
//! on loopback) and pulled back through the registry API: the manifest's
//! layers are the delivery's files, byte for byte; a second push uploads no
//! blob; wrong credentials are refused by name; a refused manifest leaves
//! no tag although its blobs went up first.

use std::path::Path;

use sha2::{Digest, Sha256};
use tuneline_deliver::modelfile;
use tuneline_deliver::oci::{push, Credentials, OllamaModel, Reference, MANIFEST};

use crate::fixture::fixture;

/// A delivery directory: the q8_0 export and its Modelfile.
fn delivery(dir: &Path) -> OllamaModel {
    let f = fixture();
    std::fs::copy(&f.exports["q8_0"], dir.join("support.q8_0.gguf")).unwrap();
    let tokenizer = tuneline_model::ModelTokenizer::load(&f.merged).unwrap();
    modelfile::write(&dir.join("support.q8_0.gguf"), tokenizer.chat_template.as_ref()).unwrap();
    OllamaModel::from_dir(dir).unwrap()
}

fn credentials() -> Credentials {
    let r = tuneline_testkit::registry();
    Credentials { user: r.user.clone(), password: r.password.clone() }
}

/// GET `path` of the registry's API.
async fn get(path: &str, accept: &str) -> reqwest::Response {
    let r = tuneline_testkit::registry();
    let response = reqwest::Client::new()
        .get(format!("http://{}/v2/{path}", r.addr))
        .basic_auth(&r.user, Some(&r.password))
        .header("accept", accept)
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success() || response.status() == 404,
        "GET {path}: {}",
        response.status()
    );
    response
}

#[test]
fn an_ollama_model_round_trips_through_a_real_registry() {
    let dir = tempfile::tempdir().unwrap();
    let model = delivery(dir.path());
    assert_eq!(
        (model.file_type.as_str(), model.stops.as_slice()),
        ("Q8_0", ["<|im_end|>".to_string()].as_slice())
    );
    let registry = &tuneline_testkit::registry().addr;
    let reference = Reference::parse(&format!("oci://{registry}/acme/support-bot:v1")).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let first = push(&model, &reference, true, Some(&credentials())).await.unwrap();
        assert_eq!(
            (first.uploaded, first.skipped),
            (5, 0),
            "model, template, params, system and config: {first:?}"
        );

        let manifest: serde_json::Value =
            get("acme/support-bot/manifests/v1", MANIFEST).await.json().await.unwrap();
        let kinds: Vec<&str> = manifest["layers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["mediaType"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "application/vnd.ollama.image.model",
                "application/vnd.ollama.image.template",
                "application/vnd.ollama.image.params",
                "application/vnd.ollama.image.system"
            ]
        );
        let gguf = std::fs::read(&model.gguf).unwrap();
        let expected: [Vec<u8>; 4] = [
            gguf,
            model.template.clone().unwrap().into_bytes(),
            br#"{"stop":["<|im_end|>"]}"#.to_vec(),
            model.system.clone().unwrap().into_bytes(),
        ];
        for (layer, want) in manifest["layers"].as_array().unwrap().iter().zip(expected) {
            let digest = layer["digest"].as_str().unwrap();
            let blob = get(&format!("acme/support-bot/blobs/{digest}"), "*/*")
                .await
                .bytes()
                .await
                .unwrap();
            assert_eq!(
                format!("sha256:{}", hex::encode(Sha256::digest(&blob))),
                digest,
                "the registry serves what the digest names"
            );
            assert!(
                blob.as_ref() == want.as_slice(),
                "layer {} is the delivery's file",
                layer["mediaType"]
            );
        }
        let config = get(
            &format!("acme/support-bot/blobs/{}", manifest["config"]["digest"].as_str().unwrap()),
            "*/*",
        )
        .await
        .json::<serde_json::Value>()
        .await
        .unwrap();
        assert_eq!(
            (
                config["model_format"].as_str(),
                config["file_type"].as_str(),
                config["model_family"].as_str()
            ),
            (Some("gguf"), Some("Q8_0"), Some("llama"))
        );

        let second = push(&model, &reference, true, Some(&credentials())).await.unwrap();
        assert_eq!(
            (second.uploaded, second.skipped, &second.manifest_digest),
            (0, 5, &first.manifest_digest),
            "a second push uploads no blob"
        );

        let wrong = Credentials { user: "tuneline".into(), password: "wrong".into() };
        let e = push(&model, &reference, true, Some(&wrong)).await.unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "registry {registry} refused the credentials for acme/support-bot (401"
            )) && e.contains("TUNELINE_REGISTRY_PASSWORD"),
            "{e}"
        );

        // A tag the registry refuses: the blobs go up first, the manifest last, so no tag appears.
        let refused = Reference::parse(&format!("oci://{registry}/acme/other:-bad")).unwrap();
        assert!(push(&model, &refused, true, Some(&credentials())).await.is_err());
        let tags = get("acme/other/tags/list", "application/json").await;
        let listed = if tags.status() == 404 {
            serde_json::Value::Null
        } else {
            tags.json::<serde_json::Value>().await.unwrap()["tags"].clone()
        };
        assert!(
            listed.is_null() || listed.as_array().is_some_and(|t| t.is_empty()),
            "no visible tag: {listed}"
        );
    });
}
