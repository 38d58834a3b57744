//! Gemma 3's fields of `config.json` (`model_type` `gemma3_text`), as
//! transformers 4 and 5 write them. What tuneline's layer does not compute
//! (soft-capped logits, bidirectional attention, another activation) is
//! refused here, by field.

use serde_json::Value;

use super::config::Gemma;

/// The activation every Gemma 3 uses (`hidden_activation`).
const ACTIVATION: &str = "gelu_pytorch_tanh";

/// Gemma 3's layer of `layers` layers from `json`.
pub(super) fn shape(json: &Value, layers: usize) -> Result<Gemma, String> {
    let activation = json["hidden_activation"].as_str().or(json["hidden_act"].as_str());
    if activation.is_some_and(|a| a != ACTIVATION) {
        return Err(format!(
            "`hidden_activation` is `{}`; tuneline computes Gemma 3's `{ACTIVATION}` only",
            activation.unwrap_or_default()
        ));
    }
    for capping in ["final_logit_softcapping", "attn_logit_softcapping"] {
        if !json[capping].is_null() {
            return Err(format!("`{capping}` is {} (Gemma 2's soft-capped logits), which tuneline does not compute; Gemma 3 sets it to null", json[capping]));
        }
    }
    if json["use_bidirectional_attention"].as_bool() == Some(true) {
        return Err("`use_bidirectional_attention` is true (an encoder such as EmbeddingGemma); tuneline trains causal decoders only".into());
    }
    let local = &json["rope_parameters"]["sliding_attention"];
    if local["rope_type"].as_str().is_some_and(|t| t != "default") {
        return Err(format!("the sliding layers' rope type is `{}`; tuneline rotates them with the default type only", local["rope_type"].as_str().unwrap_or_default()));
    }
    Ok(Gemma {
        query_pre_attn_scalar: json["query_pre_attn_scalar"].as_f64().unwrap_or(256.0),
        sliding: sliding(json, layers)?,
        local_rope_theta: local["rope_theta"]
            .as_f64()
            .or(json["rope_local_base_freq"].as_f64())
            .unwrap_or(10_000.0),
    })
}

/// Which layers attend through the sliding window: `layer_types`, or, in
/// older configs, every layer but each `sliding_window_pattern`-th.
fn sliding(json: &Value, layers: usize) -> Result<Vec<bool>, String> {
    let Some(types) = json["layer_types"].as_array() else {
        let period = json["sliding_window_pattern"].as_u64().map_or(Gemma::PERIOD, |p| p as usize);
        return Ok(Gemma::periodic(layers, period));
    };
    if types.len() != layers {
        return Err(format!(
            "`layer_types` lists {} layers but `num_hidden_layers` is {layers}",
            types.len()
        ));
    }
    types
        .iter()
        .enumerate()
        .map(|(i, t)| match t.as_str() {
            Some("sliding_attention") => Ok(true),
            Some("full_attention") => Ok(false),
            _ => Err(format!(
                "`layer_types[{i}]` is {t}, not \"sliding_attention\" or \"full_attention\""
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layer_types_come_from_the_list_or_the_older_pattern() {
        let five = serde_json::json!({"layer_types": ["sliding_attention", "full_attention"],
            "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
            "query_pre_attn_scalar": 24});
        let g = shape(&five, 2).unwrap();
        assert_eq!(
            (g.sliding, g.local_rope_theta, g.query_pre_attn_scalar),
            (vec![true, false], 1e4, 24.0)
        );
        let four = serde_json::json!({"sliding_window_pattern": 6, "rope_local_base_freq": 1e4});
        let sliding = shape(&four, 12).unwrap().sliding;
        assert_eq!(sliding.iter().filter(|s| !**s).count(), 2);
        assert!(!sliding[5] && !sliding[11] && sliding[0]);
        let err = shape(&five, 3).unwrap_err();
        assert!(err.contains("lists 2 layers but `num_hidden_layers` is 3"), "{err}");
    }

    #[test]
    fn what_tuneline_does_not_compute_is_refused_by_field() {
        let capped = serde_json::json!({"final_logit_softcapping": 30.0});
        assert!(shape(&capped, 1).unwrap_err().starts_with("`final_logit_softcapping` is 30.0"));
        let gelu = serde_json::json!({"hidden_activation": "gelu"});
        assert!(shape(&gelu, 1).unwrap_err().contains("`gelu`"));
        let encoder = serde_json::json!({"use_bidirectional_attention": true});
        assert!(shape(&encoder, 1).unwrap_err().contains("use_bidirectional_attention"));
    }
}
