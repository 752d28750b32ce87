//! The procedures as text: the five, in each server's language (`Language`: `maria`, `pg`), with
//! the blocks of statements both languages share; and creating them on a server.

use anyhow::{Context, Result};

/// The procedures' names, for errors that say which one failed to create.
const NAMES: [&str; 5] = [
    "tpcc_neword",
    "tpcc_payment",
    "tpcc_delivery",
    "tpcc_slev",
    "tpcc_ostat",
];

/// One server's five procedures, as text in its language. A placeholder alone on its line stands
/// for a block of statements: Payment and Order-Status find their customer the same way
/// (`{customer}`: `customer`, given the customer's warehouse `{w}` and district `{d}`); Payment's
/// customer update (`{update}`: `payment_customer`, with the new C_DATA `c_data`) and Delivery's
/// last steps (`{delivered}`: `DELIVERED`) are the same in both languages.
pub(super) struct Language {
    pub(super) new_order: &'static str,
    pub(super) payment: &'static str,
    pub(super) c_data: &'static str,
    pub(super) delivery: &'static str,
    pub(super) stock_level: &'static str,
    pub(super) order_status: &'static str,
    pub(super) customer: &'static str,
}

impl Language {
    /// The five texts, in the order of `NAMES`.
    pub(super) fn texts(&self) -> [String; 5] {
        let customer = |w: &str, d: &str| self.customer.replace("{w}", w).replace("{d}", d);
        let payment = put_block(self.payment, "{customer}", &customer("p_c_w", "p_c_d"));
        let payment = put_block(&payment, "{update}", &payment_customer(self.c_data));
        [
            self.new_order.to_string(),
            payment,
            put_block(self.delivery, "{delivered}", DELIVERED),
            self.stock_level.to_string(),
            put_block(self.order_status, "{customer}", &customer("p_w", "p_d")),
        ]
    }
}

/// Create (or replace) the five procedures of `language`, each by `run`; an error names the
/// server and the procedure (`failed`, given its name).
pub(super) fn create<E>(
    language: &Language,
    mut run: impl FnMut(&str) -> std::result::Result<(), E>,
    failed: impl Fn(&str) -> String,
) -> Result<()>
where
    E: std::error::Error + Send + Sync + 'static,
{
    for (name, text) in NAMES.iter().zip(language.texts()) {
        run(&text).with_context(|| failed(name))?;
    }
    Ok(())
}

/// Payment's customer, read with its row lock and updated: the payment taken, and with credit
/// BC prepended to C_DATA (`c_data`, the new value in the server's language). Both servers'
/// procedures run these statements.
fn payment_customer(c_data: &str) -> String {
    format!(
        r"SELECT c_credit INTO v_credit FROM customer WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c FOR UPDATE;
IF v_credit = 'BC' THEN
  UPDATE customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount,
    c_payment_cnt = c_payment_cnt + 1,
    c_data = {c_data}
    WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c;
ELSE
  UPDATE customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount,
    c_payment_cnt = c_payment_cnt + 1
    WHERE c_w_id = p_c_w AND c_d_id = p_c_d AND c_id = v_c;
END IF;
"
    )
}

/// Delivery's last steps for a district's oldest new order `v_o`, of customer `v_c`: its lines
/// delivered, and their amount paid to the customer. Both servers' procedures run these.
const DELIVERED: &str = "UPDATE order_line SET ol_delivery_d = p_now WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
SELECT COALESCE(SUM(ol_amount), 0) INTO v_sum FROM order_line
  WHERE ol_w_id = p_w AND ol_d_id = d AND ol_o_id = v_o;
UPDATE customer SET c_balance = c_balance + v_sum, c_delivery_cnt = c_delivery_cnt + 1
  WHERE c_w_id = p_w AND c_d_id = d AND c_id = v_c;
";

/// `text` with the line that holds `placeholder` alone replaced by `block`, each line of it
/// indented as the placeholder is.
fn put_block(text: &str, placeholder: &str, block: &str) -> String {
    let at = text
        .find(placeholder)
        .expect("the placeholder is in the text");
    let line = text[..at].rfind('\n').map_or(0, |n| n + 1);
    let indent = &text[line..at];
    let rest = &text[at + placeholder.len()..];
    let rest = rest.strip_prefix('\n').unwrap_or(rest);
    let lines: String = block.lines().map(|l| format!("{indent}{l}\n")).collect();
    format!("{}{lines}{rest}", &text[..line])
}

#[cfg(test)]
mod tests {
    use super::super::{maria::MARIADB, pg::POSTGRES};
    use super::*;

    #[test]
    fn a_block_takes_its_placeholders_line_and_indentation() {
        let text = "BEGIN\n    {x}\nEND";
        assert_eq!(
            put_block(text, "{x}", "a;\n  b;\n"),
            "BEGIN\n    a;\n      b;\nEND"
        );
    }

    #[test]
    fn every_procedure_is_whole_and_begins_with_its_name() {
        for language in [MARIADB, POSTGRES] {
            for (name, text) in NAMES.iter().zip(language.texts()) {
                assert!(!text.contains(['{', '}']), "{text}");
                assert!(text.contains(&format!(" {name}(")), "{text}");
            }
        }
    }
}
