//! Counts the tokens of each file given (or of standard input) with a model's tokenizer, as
//! `--max-tokens` counts them: `cargo run --release --example count_tokens -- [--model M] FILE...`.
//! Only the tokenizer is read, never the weights. Used for the README's token figures.

fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let model = match args.iter().position(|a| a == "--model" || a == "-m") {
        Some(i) if i + 1 < args.len() => {
            let m = args.remove(i + 1);
            args.remove(i);
            Some(m)
        }
        _ => None,
    };
    let (tokenizer, name) = keet::llm::tokenizer::for_model(model.as_deref())?;
    let texts: Vec<(String, String)> = if args.is_empty() {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)?;
        vec![("-".into(), s)]
    } else {
        args.iter().map(|p| Ok((p.clone(), std::fs::read_to_string(p)?))).collect::<anyhow::Result<_>>()?
    };
    for (path, text) in texts {
        let tokens = tokenizer.encode(&text)?.len();
        println!("{tokens}\t{}\t{path}\t{name}", text.len());
    }
    Ok(())
}
