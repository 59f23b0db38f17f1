
# Added by FileProviderKit's install (Packaging/completions/bash-colon-words.bash): bash splits
# words at ':' (it is in COMP_WORDBREAKS), so `photos:/2023` reached the function above as
# three words, `photos`, `:` and `/2023`, and arguments were miscounted. The words are joined
# again before it runs, and its answers are trimmed back to the part after the last ':', which
# is what bash replaces.
_fileproviderctl_whole_words() {
    local -a words=()
    local -i index cword=0
    for ((index = 0; index < ${#COMP_WORDS[@]}; index++)); do
        local word=${COMP_WORDS[index]}
        if ((index > 1)) && [[ $word == : || ${COMP_WORDS[index - 1]} == : ]]; then
            words[${#words[@]} - 1]+=$word
        else
            words+=("$word")
        fi
        ((index == COMP_CWORD)) && cword=$((${#words[@]} - 1))
    done
    local -a COMP_WORDS=("${words[@]}")
    local COMP_CWORD=$cword
    local current=${COMP_WORDS[COMP_CWORD]}
    _fileproviderctl "$1" "$current" "${COMP_WORDS[COMP_CWORD - 1]}"
    local -i reply
    if [[ $current == *:* ]]; then
        local before=${current%"${current##*:}"}
        for ((reply = 0; reply < ${#COMPREPLY[@]}; reply++)); do
            COMPREPLY[reply]=${COMPREPLY[reply]#"$before"}
        done
    fi
    # `-o filenames` would quote a ':' in an answer (`photos\:/`), so it is off for answers
    # with one; otherwise it quotes what needs it and adds the '/' after local folders itself.
    local colon=false
    for ((reply = 0; reply < ${#COMPREPLY[@]}; reply++)); do
        [[ ${COMPREPLY[reply]} == *:* ]] && colon=true
    done
    if $colon; then
        compopt +o filenames 2>/dev/null
    else
        for ((reply = 0; reply < ${#COMPREPLY[@]}; reply++)); do
            [[ ${COMPREPLY[reply]} == ?*/ && -d ${COMPREPLY[reply]} ]] && COMPREPLY[reply]=${COMPREPLY[reply]%/}
        done
    fi
    # A folder in a domain: no space after it, its items come next.
    if ((${#COMPREPLY[@]} == 1)) && [[ ${COMPREPLY[0]} == */ ]]; then
        compopt -o nospace 2>/dev/null
    fi
    return 0
}
complete -o filenames -F _fileproviderctl_whole_words fileproviderctl
